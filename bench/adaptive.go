package main

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookpace/hookpace/internal/overload"
)

// 6. Adaptive concurrency, on request (-only adaptive): the
// same backlog delivered with a hand-tuned fixed concurrency, with
// concurrency: auto (max 64) and with a fixed concurrency far too high,
// to two partners, side by side in one run:
//
//   - slow: 4 workers, 20 ms a request plus 5 ms for each request still
//     waiting, 503 after 500 ms waiting; hookpace at 1000/s burst 100
//     (a user who guessed high);
//   - fast: a healthy partner, 64 workers at 5 ms that never queue;
//     hookpace at 1,000,000/s burst 1000, so that only the concurrency
//     bounds the throughput. This one decides the default.
//
// Each case: a fresh hookpace, the backlog queued behind a pause, then
// resume to the last 2xx (capped at -adaptive-limit), the 503s the
// partner sent and the partner's p99 service time. The partner runs in
// this process; its service times are its own sleeps.

type adaptiveCase struct {
	partner     string // "slow" or "fast"
	concurrency string // "4", "auto", "64"
}

type adaptiveRow struct {
	c         adaptiveCase
	n         int
	delivered int
	took      time.Duration
	capped    bool // took is the cap: not all delivered
	rejected  int
	p99       time.Duration
	peak      int
	others    float64
	steal     float64
	why       string // /v1/hosts concurrency_why at the end (auto)
}

func (b *bench) adaptive() error {
	var cases []adaptiveCase
	for _, p := range []string{"slow", "fast"} {
		for _, c := range []string{"4", "auto", "64"} {
			cases = append(cases, adaptiveCase{p, c})
		}
	}
	for _, c := range cases {
		row, err := b.adaptiveOnce(c)
		if err != nil {
			return fmt.Errorf("%s partner, concurrency %s: %w", c.partner, c.concurrency, err)
		}
		b.rep.adaptive = append(b.rep.adaptive, row)
	}
	return nil
}

func (b *bench) adaptiveOnce(c adaptiveCase) (*adaptiveRow, error) {
	p := overload.New(4, 20*time.Millisecond, 5*time.Millisecond, 500*time.Millisecond)
	rate, burst, n, limit := "1000/s", 100, 1500, 2*time.Minute
	if c.partner == "fast" {
		p = overload.New(64, 5*time.Millisecond, 0, time.Minute)
		rate, burst, n = "1000000/s", 1000, 10000
	}
	if b.quick {
		n, limit = n*2/5, time.Minute
	}
	addr, stop, err := startPartner(p)
	if err != nil {
		return nil, err
	}
	defer stop()
	conc := c.concurrency
	if conc == "auto" {
		conc = "auto, max_concurrency: 64"
	}
	hp, err := startHookpace(b.bin, b.work, "adaptive", hpConfig{logLevel: b.logLevel, bigSpool: true,
		extra: fmt.Sprintf("hosts:\n  %q: {rate: %s, burst: %d, concurrency: %s, backoff_initial: 100ms}\n", addr, rate, burst, conc)})
	if err != nil {
		return nil, err
	}
	defer hp.cleanup(b.keep)
	if err := hp.pause(addr); err != nil {
		return nil, err
	}
	logf("adaptive: %s partner, concurrency %s: queueing %d webhooks (paused)", c.partner, c.concurrency, n)
	if bad, err := postN(hp.proxy, "http://"+addr+"/hook", b.body, n, 16); bad > 0 {
		return nil, fmt.Errorf("prefill: %d not accepted (%v)", bad, err)
	}
	if err := hp.waitQueued(int64(n), time.Minute); err != nil {
		return nil, err
	}
	b.waitQuiet("adaptive")
	dist := startDisturbance()
	t0 := time.Now()
	if err := hp.resume(addr); err != nil {
		return nil, err
	}
	row := &adaptiveRow{c: c, n: n}
	row.delivered, row.took, row.capped = p.WaitOK(n, t0, limit)
	row.others, row.steal = dist.stop()
	row.peak, row.rejected, row.p99 = p.Stats()
	if c.concurrency == "auto" {
		var hosts struct {
			Hosts []struct {
				Why string `json:"concurrency_why"`
			} `json:"hosts"`
		}
		if err := getJSON("http://"+hp.admin+"/v1/hosts", &hosts); err == nil && len(hosts.Hosts) == 1 {
			row.why = hosts.Hosts[0].Why
		}
	}
	return row, nil
}

// startPartner serves p on a loopback port.
func startPartner(p *overload.Partner) (addr string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: p}
	go srv.Serve(ln)
	return ln.Addr().String(), func() { srv.Close() }, nil
}

func (r *report) writeAdaptive(s *strings.Builder) {
	s.WriteString("\n6. Adaptive concurrency: the same backlog with a fixed concurrency, concurrency: auto (max 64) and a fixed 64,\n" +
		"   from resume to the last 2xx. slow: 4 workers, 20 ms + 5 ms per request waiting, 503 after 500 ms waiting, at 1000/s\n" +
		"   burst 100. fast: 64 workers at 5 ms, never queueing, at 1,000,000/s burst 1000 (decides the default)\n")
	tw := tabwriter.NewWriter(s, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  partner\tconcurrency\tN\tdelivered\ttime\treq/s\tvs fixed 4\t503s\tp99 service\tmost at once\tothers' cores\tsteal\t")
	base := map[string]time.Duration{}
	for _, a := range r.adaptive {
		if a.c.concurrency == "4" {
			base[a.c.partner] = a.took
		}
	}
	for _, a := range r.adaptive {
		took := a.took.Round(10 * time.Millisecond).String()
		if a.capped {
			took = "> " + took
		}
		vs := "-"
		if b := base[a.c.partner]; b > 0 && !a.capped {
			vs = fmt.Sprintf("%.2fx", a.took.Seconds()/b.Seconds())
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s\t%.0f\t%s\t%d\t%s\t%d\t%.2f\t%.2f\t\n", a.c.partner, a.c.concurrency, a.n, a.delivered,
			took, float64(a.delivered)/a.took.Seconds(), vs, a.rejected, a.p99.Round(time.Millisecond), a.peak, a.others, a.steal)
	}
	tw.Flush()
	for _, a := range r.adaptive {
		if a.why != "" {
			fmt.Fprintf(s, "  %s partner, auto at the end: %s\n", a.c.partner, a.why)
		}
	}
}

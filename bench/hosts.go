package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// 10. Many hosts (-only hosts): H hosts at 127.x.y.z (-hosts-n, default
// 50,000) on one receiver in this process, K webhooks each
// (-hosts-per, default 4) posted in K rounds over 64 connections while
// hookpace delivers them, product defaults otherwise. Reported: VmRSS
// idle at start, peak VmHWM until all are delivered, VmRSS after; then,
// with every host still known, one GET each of /metrics, /v1/hosts (the
// default page) and /v1/hosts?limit=0: bytes and seconds. With
// -hosts-against BIN, each rep runs BIN first, then the binary under test.
// With -hosts-one, each run is preceded by one that posts the same number
// of webhooks in the same rounds to a single host, and CPU per webhook is
// reported against it; both then run with a rate that never holds a host,
// so that the one host's queue is not paced.

type hostsResult struct {
	bin                   string
	hosts, per            int
	delivered, conns      int64
	refused               int64 // posts that got no 2xx
	idleKiB, hwmKiB       int64
	afterKiB              int64
	cpu                   time.Duration
	elapsed               time.Duration
	metricsB, pageB, allB int64
	metricsT, pageT, allT time.Duration
	hostLabels            int  // distinct host label values on /metrics
	one                   bool // every webhook to one host (-hosts-one)
}

func (b *bench) hostsSection() error {
	recv, err := startConnCounter()
	if err != nil {
		return err
	}
	defer recv.srv.Close()
	_, port, _ := net.SplitHostPort(recv.ln.Addr().String())
	targets := make([]string, b.hostsN)
	for i := range targets {
		targets[i] = fmt.Sprintf("http://127.%d.%d.%d:%s/hook", 1+i/62500, i/250%250+1, i%250+1, port)
	}
	bins := []string{b.bin}
	if b.hostsAgainst != "" {
		bins = []string{b.hostsAgainst, b.bin}
	}
	for rep := 0; rep < b.reps; rep++ {
		for _, bin := range bins {
			runs := [][]string{targets}
			if b.hostsOne {
				one := make([]string, len(targets))
				for i := range one {
					one[i] = targets[0]
				}
				runs = [][]string{one, targets}
			}
			for k, ts := range runs {
				r, err := b.manyHosts(bin, recv, ts)
				if err != nil {
					return err
				}
				r.one = b.hostsOne && k == 0
				b.rep.hosts = append(b.rep.hosts, r)
			}
		}
	}
	return nil
}

func (b *bench) manyHosts(bin string, recv *connCounter, targets []string) (*hostsResult, error) {
	b.waitQuiet("hosts")
	c := hpConfig{logLevel: b.logLevel, bigSpool: true}
	if b.hostsYAML != "" {
		y, err := os.ReadFile(b.hostsYAML)
		if err != nil {
			return nil, fmt.Errorf("-hosts-config: %w", err)
		}
		c.extra = string(y)
	}
	if b.hostsOne {
		c.defaultRate, c.defaultBurst = "1000000/s", 1000000
	}
	hp, err := startHookpace(bin, b.work, "hosts", c)
	if err != nil {
		return nil, err
	}
	defer hp.cleanup(b.keep)
	time.Sleep(2 * time.Second) // settle: what the process holds before any webhook
	r := &hostsResult{bin: bin, hosts: distinct(targets)}
	r.per = len(targets) * b.hostsPer / r.hosts
	r.idleKiB, _, _ = memKiB(hp.pid())
	served0, opened0 := recv.served.Load(), recv.opened.Load()
	cpu0, t0 := cpuTime(hp.pid()), time.Now()
	for round := 0; round < b.hostsPer; round++ {
		bad, err := postSpread(hp.proxy, targets, []byte(`{"n":1}`), len(targets), 64)
		if bad > 0 {
			// A refusal is a result (an unbounded idle pool ran out of
			// file descriptors at 50,000 hosts): counted, and the rest
			// are still delivered and measured.
			logf("hosts: %s: round %d: %d not accepted (%v)", bin, round, bad, err)
			r.refused += bad
		}
	}
	time.Sleep(time.Second) // the refusals' retries in flight have settled
	accepted, _ := hp.ingestOutcomes()
	want := served0 + int64(accepted["accepted"])
	deadline := time.Now().Add(15 * time.Minute)
	for recv.served.Load() < want {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("receiver got %d of %d", recv.served.Load()-served0, want-served0)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.elapsed, r.cpu = time.Since(t0), cpuTime(hp.pid())-cpu0
	r.delivered, r.conns = recv.served.Load()-served0, recv.opened.Load()-opened0
	_, r.hwmKiB, _ = memKiB(hp.pid())
	var body string
	body, r.metricsB, r.metricsT, err = timedGet("http://" + hp.admin + "/metrics")
	if err != nil {
		return nil, err
	}
	r.hostLabels = countHostLabels(body)
	if _, r.pageB, r.pageT, err = timedGet("http://" + hp.admin + "/v1/hosts"); err != nil {
		return nil, err
	}
	if _, r.allB, r.allT, err = timedGet("http://" + hp.admin + "/v1/hosts?limit=0"); err != nil {
		return nil, err
	}
	r.afterKiB, _, _ = memKiB(hp.pid())
	logf("hosts: %s: %d delivered to %d hosts in %v; idle %d KiB, peak %d KiB; /metrics %d B in %v; /v1/hosts?limit=0 %d B in %v",
		bin, r.delivered, r.hosts, r.elapsed.Round(time.Second), r.idleKiB, r.hwmKiB, r.metricsB, r.metricsT, r.allB, r.allT)
	return r, nil
}

// timedGet reads all of u: the body (kept only when under 64 MB), its
// size and the time to the last byte.
func timedGet(u string) (string, int64, time.Duration, error) {
	c := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 2 * time.Minute}
	t0 := time.Now()
	resp, err := c.Get(u)
	if err != nil {
		return "", 0, 0, err
	}
	defer resp.Body.Close()
	var sb strings.Builder
	n, err := io.Copy(&sb, io.LimitReader(resp.Body, 64<<20))
	d := time.Since(t0)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return sb.String(), n, d, err
}

// countHostLabels counts the distinct host label values of
// hookpace_delivery_latency_seconds_count.
func countHostLabels(metrics string) int {
	seen := map[string]bool{}
	for _, line := range strings.Split(metrics, "\n") {
		if rest, ok := strings.CutPrefix(line, "hookpace_delivery_latency_seconds_count{"); ok {
			if i := strings.Index(rest, `host="`); i >= 0 {
				h := rest[i+6:]
				seen[h[:strings.IndexByte(h, '"')]] = true
			}
		}
	}
	return len(seen)
}

func (r *report) writeHosts(s io.Writer) {
	fmt.Fprintf(s, "\nMany hosts: K webhooks to each of H hosts, all delivered; then one scrape of each view\n")
	tw := table(s)
	fmt.Fprintln(tw, "  binary\thosts\tK\tdelivered\tnot accepted\tnew conns\tCPU/webhook\tVmRSS idle\tpeak VmHWM\tVmRSS after\t/metrics\thost labels\t/v1/hosts page\t/v1/hosts?limit=0\t")
	for _, x := range r.hosts {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%d\t%.0f µs\t%.1f MiB\t%.1f MiB\t%.1f MiB\t%s in %.2f s\t%d\t%s in %.2f s\t%s in %.2f s\t\n",
			x.bin, x.hosts, x.per, x.delivered, x.refused, x.conns, x.cpuPerWebhook(),
			float64(x.idleKiB)/1024, float64(x.hwmKiB)/1024, float64(x.afterKiB)/1024,
			mb(x.metricsB), x.metricsT.Seconds(), x.hostLabels, mb(x.pageB), x.pageT.Seconds(), mb(x.allB), x.allT.Seconds())
	}
	tw.Flush()
	var ratios []float64
	for i, x := range r.hosts {
		if x.one && i+1 < len(r.hosts) {
			ratios = append(ratios, r.hosts[i+1].cpuPerWebhook()/x.cpuPerWebhook())
		}
	}
	if len(ratios) > 0 {
		fmt.Fprintf(s, "  CPU per webhook, many hosts against one host (same webhooks, same rounds): median %.2f× (runs %s)\n", median(ratios), fmtRatios(ratios))
	}
}

func (x *hostsResult) cpuPerWebhook() float64 {
	return float64(x.cpu.Microseconds()) / float64(max(x.delivered, 1))
}

// distinct counts the distinct strings of ts.
func distinct(ts []string) int {
	seen := make(map[string]bool, len(ts))
	for _, t := range ts {
		seen[t] = true
	}
	return len(seen)
}

func mb(n int64) string { return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + " MB" }

package main

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

// 7. Fair delivery within a host, on request (-only fairness):
// the acceptance, measured. A partner at 50/s burst 5 with
// fairness: {key: header}. Tenant A's backlog (-fair-backlog webhooks,
// 50,000) is queued behind a pause, hookpace is killed and started again
// on the spool (so that its peak RSS is what delivering from that backlog
// costs, not the ingest's), the host resumed, and tenant B posts 10
// webhooks one after another while A drains: the time from each of B's
// 202s to its arrival, A's rate meanwhile, and hookpace's peak RSS. The
// same run without A's backlog is the baseline, and the same backlog
// spread over -fair-keys keys (one webhook each: many tenants) checks the
// dispatcher's bound for many keys. In one FIFO, B's webhooks would wait
// behind A's whole backlog: backlog ÷ 49.5/s.

const (
	fairRate  = 50
	fairBs    = 10              // B's webhooks; 1 when A's backlog is over many keys
	fairDrain = 3 * time.Second // A's rate is measured over this after B's last arrival
)

type fairnessRow struct {
	backlog  int
	keys     int // A's backlog over this many fairness keys
	fill     time.Duration
	waits    []time.Duration // B's 202 to its arrival
	ingest   []time.Duration // B's POST to its 202
	rate     float64         // arrivals/s at the partner, from B's first 202 to fairDrain after its last arrival
	aShare   float64         // A's part of them
	hwm, rss int64           // KiB, of the process that delivered
	hwmStart int64           // KiB, its peak before the resume
	lost     int64           // A's webhooks neither delivered nor queued at the end
}

// fairPartner answers 200 and counts A's arrivals (/a/...) and notes
// when each of B's (/b/i) came.
type fairPartner struct {
	a  atomic.Int64
	mu sync.Mutex
	b  map[int]time.Time
	ch chan struct{}
}

func (p *fairPartner) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	io.Copy(io.Discard, r.Body)
	if i, ok := strings.CutPrefix(r.URL.Path, "/b/"); ok {
		n, _ := strconv.Atoi(i)
		p.mu.Lock()
		if _, seen := p.b[n]; !seen {
			p.b[n] = at
		}
		p.mu.Unlock()
		select {
		case p.ch <- struct{}{}:
		default:
		}
	} else {
		p.a.Add(1)
	}
	w.WriteHeader(http.StatusOK)
}

func (p *fairPartner) bArrivals() map[int]time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.b)
}

func (b *bench) fairness() error {
	for rep := 1; rep <= b.reps; rep++ {
		for _, c := range [][2]int{{0, 1}, {50000, 1}, {b.fairKeys, b.fairKeys}} {
			row, err := b.fairnessOnce(c[0], c[1])
			if err != nil {
				return fmt.Errorf("backlog %d over %d keys: %w", c[0], c[1], err)
			}
			b.rep.fairness = append(b.rep.fairness, row)
		}
	}
	return nil
}

// fairnessOnce measures with n webhooks of tenant A queued, over keys
// fairness keys (1: all "A"; more: "A-0", "A-1", ...: many tenants).
func (b *bench) fairnessOnce(n, keys int) (*fairnessRow, error) {
	p := &fairPartner{b: map[int]time.Time{}, ch: make(chan struct{}, 1)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: p}
	go srv.Serve(ln)
	defer srv.Close()
	addr := ln.Addr().String()
	cfg := hpConfig{logLevel: b.logLevel, bigSpool: true,
		extra: fmt.Sprintf("hosts:\n  %q: {rate: %d/s, burst: 5, concurrency: 4, fairness: {key: header}}\n", addr, fairRate)}
	hp, err := startHookpace(b.bin, b.work, "fairness", cfg)
	if err != nil {
		return nil, err
	}
	defer hp.cleanup(b.keep)
	if err := hp.pause(addr); err != nil {
		return nil, err
	}
	row := &fairnessRow{backlog: n, keys: keys}
	logf("fairness: queueing %d webhooks over %d keys (paused)", n, keys)
	key := func(i int64) string { return "A" }
	if keys > 1 {
		key = func(i int64) string { return "A-" + strconv.FormatInt(i%int64(keys), 10) }
	}
	t0 := time.Now()
	if bad, err := postKeyed(hp.proxy, "http://"+addr+"/a/", key, n, 16); bad > 0 {
		return nil, fmt.Errorf("prefill: %d not accepted (%v)", bad, err)
	}
	row.fill = time.Since(t0)
	if err := hp.waitQueued(int64(n), time.Minute); err != nil {
		return nil, err
	}
	// The process that delivers starts on the spool as it is.
	hp.kill()
	hp2, err := restartHookpace(hp, b.bin, cfg)
	if err != nil {
		return nil, err
	}
	defer hp2.kill()
	time.Sleep(time.Second)
	if _, row.hwmStart, err = memKiB(hp2.pid()); err != nil {
		return nil, err
	}
	if err := hp2.resume(addr); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(10 * time.Second); n > 0 && p.a.Load() < 10 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond) // A drains before B comes
	}
	return row, b.fairnessMeasure(hp2, p, addr, row)
}

// fairnessMeasure posts B's webhooks, waits for them, and reads the rate
// and the memory.
func (b *bench) fairnessMeasure(hp *hookpace, p *fairPartner, addr string, row *fairnessRow) error {
	c := newClient(hp.proxy, 1)
	defer c.CloseIdleConnections()
	bs := fairBs
	if row.keys > 1 {
		bs = 1 // each of B's would wait a round of A's keys with work
	}
	acked := make([]time.Time, bs)
	a0 := p.a.Load()
	for i := range bs {
		sent := time.Now()
		code, err := postWith(c, fmt.Sprintf("http://%s/b/%d", addr, i), b.body, "B")
		if err != nil || code != http.StatusAccepted {
			return fmt.Errorf("tenant B's webhook %d: %d %v", i, code, err)
		}
		acked[i] = time.Now()
		row.ingest = append(row.ingest, acked[i].Sub(sent))
	}
	deadline := time.After(5 * time.Minute)
	for len(p.bArrivals()) < bs {
		select {
		case <-p.ch:
		case <-deadline:
			return fmt.Errorf("%d of B's %d webhooks arrived within 5 minutes", len(p.bArrivals()), bs)
		}
	}
	got := p.bArrivals()
	for i := range bs {
		row.waits = append(row.waits, got[i].Sub(acked[i]))
	}
	time.Sleep(fairDrain)
	el := time.Since(acked[0])
	a := p.a.Load() - a0
	row.rate = float64(a+int64(bs)) / el.Seconds()
	row.aShare = float64(a) / float64(a+int64(bs))
	var err error
	if row.rss, row.hwm, err = memKiB(hp.pid()); err != nil {
		return err
	}
	u, err := hp.spool()
	if err != nil {
		return err
	}
	row.lost = int64(row.backlog) - p.a.Load() - u.Messages
	return nil
}

// postKeyed sends n webhooks to prefix+i with Hookpace-Fairness-Key:
// key(i) over conns connections and returns how many did not get a 2xx.
func postKeyed(proxy, prefix string, key func(int64) string, n, conns int) (non2xx int64, err error) {
	body := makeBody()
	return postEach(proxy, n, conns, func(c *http.Client, i int64) (bool, error) {
		code, err := postWith(c, prefix+strconv.FormatInt(i, 10), body, key(i))
		if err != nil || code < 200 || code > 299 {
			return false, fmt.Errorf("status %d: %v", code, err)
		}
		return true, nil
	})
}

// postWith POSTs body to target with Hookpace-Fairness-Key: key.
func postWith(c *http.Client, target string, body []byte, key string) (int, error) {
	req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Hookpace-Fairness-Key", key)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (r *report) writeFairness(s *strings.Builder) {
	fmt.Fprintf(s, "\n7. Fairness: a partner at %d/s burst 5, concurrency 4, fairness: {key: header}. Tenant A's backlog queued\n"+
		"   (paused), hookpace restarted on the spool and resumed; then tenant B posts %d webhooks one after another.\n"+
		"   Over 50,000 keys (a webhook each), B posts one: it waits for a round of the keys in memory.\n"+
		"   wait = B's 202 to its arrival at the partner (negative: it arrived before the client read the 202).\n", fairRate, fairBs)
	tw := tabwriter.NewWriter(s, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  A queued\tkeys\tfill\tB wait p50\tB wait max\tFIFO would wait\tB 202 p50\trate at partner\tA's share\tpeak RSS before resume\tpeak RSS\tRSS at end\tA lost\t")
	base := map[int]int64{}
	for _, x := range r.fairness {
		if x.backlog == 0 {
			base[0] = x.hwm
		}
	}
	for _, x := range r.fairness {
		w := slices.Clone(x.waits)
		slices.Sort(w)
		in := slices.Clone(x.ingest)
		slices.Sort(in)
		fifo := time.Duration(float64(x.backlog) / (0.99 * fairRate) * float64(time.Second))
		ratio := ""
		if b := base[0]; b > 0 && x.backlog > 0 {
			ratio = fmt.Sprintf(" (%.2fx)", float64(x.hwm)/float64(b))
		}
		fmt.Fprintf(tw, "  %d\t%d\t%s\t%s\t%s\t%s\t%s\t%.1f/s\t%s\t%s\t%s%s\t%s\t%d\t\n", x.backlog, x.keys, x.fill.Round(10*time.Millisecond),
			ms(w[len(w)/2]), ms(w[len(w)-1]), fifo.Round(time.Second), ms(in[len(in)/2]), x.rate, pct(x.aShare),
			mib(x.hwmStart), mib(x.hwm), ratio, mib(x.rss), x.lost)
	}
	tw.Flush()
}

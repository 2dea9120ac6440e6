package main

// Accept→delivery latency (on request: -only latency): webhooks offered
// one at a time at a steady rate (open loop, -lat-rate, default 200/s)
// through hookpace to a receiver in this process, which notes when each
// arrives. A webhook's latency is its arrival at the receiver minus the
// moment its 202 reached the sender, on one clock; it is negative when the
// delivery overtook the 202 on its way back.

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/hookpace/hookpace/bench/hostinfo"
)

type latencyRow struct {
	rep           int
	bin           string
	offered, sent int
	non2xx        int
	lost          int // 202 but never arrived
	p50, p99, max time.Duration
	acceptP99     time.Duration // the 202's own latency, for comparison
	load          string
	others, steal float64
}

func (b *bench) latency() error {
	bins := []string{b.bin}
	if b.latOld != "" {
		bins = []string{b.latOld, b.bin} // alternating pairs: old, new
	}
	for rep := 1; rep <= b.reps; rep++ {
		for _, bin := range bins {
			row, err := b.latencyOnce(rep, bin)
			if err != nil {
				return err
			}
			b.rep.latency = append(b.rep.latency, row)
		}
	}
	return nil
}

func (b *bench) latencyOnce(rep int, bin string) (*latencyRow, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	n := int(b.latRate * b.latDur.Seconds())
	arrived := make([]time.Time, n+1)
	var mu sync.Mutex
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		io.Copy(io.Discard, r.Body)
		if i, err := strconv.Atoi(r.Header.Get("X-Bench-Seq")); err == nil && i > 0 && i <= n {
			mu.Lock()
			if arrived[i].IsZero() {
				arrived[i] = now
			}
			mu.Unlock()
		}
		w.WriteHeader(http.StatusOK)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	recv := ln.Addr().String()
	hp, err := startHookpace(bin, b.work, "latency", hpConfig{logLevel: b.logLevel,
		hosts: []hostCfg{{key: recv, rate: "1000/s", burst: 100, concurrency: 4}}})
	if err != nil {
		return nil, err
	}
	defer hp.cleanup(b.keep)
	b.waitQuiet("latency")
	row := &latencyRow{rep: rep, bin: bin, offered: n}
	logf("latency rep %d (%s): %d webhooks at %.0f/s", rep, bin, n, b.latRate)
	c := newClient(hp.proxy, 64)
	defer c.CloseIdleConnections()
	accepted := make([]time.Time, n+1)
	took := make([]time.Duration, 0, n)
	var wg sync.WaitGroup
	dist := startDisturbance()
	t0 := time.Now()
	gap := time.Duration(float64(time.Second) / b.latRate)
	for i := 1; i <= n; i++ {
		time.Sleep(time.Until(t0.Add(time.Duration(i-1) * gap)))
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, "http://"+recv+"/hook", bytes.NewReader(b.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Bench-Seq", strconv.Itoa(i))
			start := time.Now()
			resp, err := c.Do(req)
			if err != nil {
				mu.Lock()
				row.non2xx++
				mu.Unlock()
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if resp.StatusCode/100 != 2 {
				row.non2xx++
				return
			}
			accepted[i] = now
			took = append(took, now.Sub(start))
		}(i)
	}
	wg.Wait()
	// Wait for the last deliveries.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		missing := 0
		for i := 1; i <= n; i++ {
			if !accepted[i].IsZero() && arrived[i].IsZero() {
				missing++
			}
		}
		mu.Unlock()
		if missing == 0 || time.Now().After(deadline) {
			row.lost = missing
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	row.others, row.steal = dist.stop()
	row.load = hostinfo.LoadAvg()
	mu.Lock()
	defer mu.Unlock()
	var lat []time.Duration
	for i := 1; i <= n; i++ {
		if !accepted[i].IsZero() && !arrived[i].IsZero() {
			lat = append(lat, arrived[i].Sub(accepted[i]))
			row.sent++
		}
	}
	if b.latDump != "" {
		var out strings.Builder
		for i := 1; i <= n; i++ {
			if !accepted[i].IsZero() && !arrived[i].IsZero() {
				fmt.Fprintf(&out, "%d\t%.3f\t%.3f\n", i, float64(accepted[i].Sub(t0))/1e6, float64(arrived[i].Sub(accepted[i]))/1e6)
			}
		}
		os.WriteFile(fmt.Sprintf("%s-rep%d-%s.tsv", b.latDump, rep, filepath.Base(filepath.Dir(bin))), []byte(out.String()), 0o644)
	}
	if len(lat) == 0 {
		return nil, fmt.Errorf("latency: nothing delivered (%d not 2xx)", row.non2xx)
	}
	slices.Sort(lat)
	slices.Sort(took)
	row.p50, row.p99, row.max = quantile(lat, 50), quantile(lat, 99), lat[len(lat)-1]
	row.acceptP99 = quantile(took, 99)
	return row, nil
}

func quantile(xs []time.Duration, p float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	i := int(float64(len(xs)-1) * p / 100)
	return xs[i]
}

func (r *report) writeLatency(s *strings.Builder) {
	fmt.Fprintf(s, "\nAccept→delivery latency: webhooks offered at a steady rate (open loop) through hookpace (host rate 1000/s,\n"+
		"   burst 100, concurrency 4) to a receiver in the bench; latency = arrival at the receiver - the 202 at the sender\n")
	tw := tabwriter.NewWriter(s, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rep\tbinary\toffered\tdelivered\tnot 2xx\tlost\tp50\tp99\tmax\t202 p99\tothers' cores\tsteal\tload avg\t")
	for _, x := range r.latency {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%v\t%v\t%v\t%v\t%.2f\t%.2f\t%s\t\n", x.rep, x.bin, x.offered, x.sent, x.non2xx, x.lost,
			ms(x.p50), ms(x.p99), ms(x.max), ms(x.acceptP99), x.others, x.steal, strings.TrimPrefix(x.load, "avg "))
	}
	tw.Flush()
}

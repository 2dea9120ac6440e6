package main

import (
	"fmt"
	"net/http"
	"slices"
	"time"
)

// 4. Pacing

type pacingCase struct {
	rate  string
	perS  float64
	burst int
}

type windowCheck struct {
	w     float64
	max   int
	bound float64
	slack float64 // seconds of arrival-time compression that would explain an excess
}

type pacingResult struct {
	c          pacingCase
	n          int
	got        int
	windows    []windowCheck
	steadyRate float64 // (N-1-B) / (t[N-1] - t[B])
	overall    float64 // N / (t[N-1] - resume)
}

func (b *bench) pacing() error {
	cases := []pacingCase{{"200/s", 200, 20}, {"50/s", 50, 5}, {"600/m", 10, 10}}
	sink, err := startSink(len(cases), http.StatusOK, "all")
	if err != nil {
		return err
	}
	defer sink.stop()
	var hosts []hostCfg
	for i, c := range cases {
		hosts = append(hosts, hostCfg{key: sink.addrs[i], rate: c.rate, burst: c.burst, concurrency: 8})
	}
	hp, err := startHookpace(b.bin, b.work, "pacing", hpConfig{logLevel: b.logLevel, bigSpool: true, hosts: hosts})
	if err != nil {
		return err
	}
	defer hp.cleanup(b.keep)
	total := 0
	ns := make([]int, len(cases))
	for i, c := range cases {
		if err := hp.pause(sink.addrs[i]); err != nil {
			return err
		}
		ns[i] = c.burst + int(c.perS*b.backlog.Seconds())
		logf("pacing: queueing %d webhooks for a %s burst %d host (paused)", ns[i], c.rate, c.burst)
		bad, err := postN(hp.proxy, "http://"+sink.addrs[i]+"/hook", b.body, ns[i], 16)
		if bad > 0 {
			return fmt.Errorf("prefill: %d not accepted (%v)", bad, err)
		}
		total += ns[i]
	}
	if err := hp.waitQueued(int64(total), time.Minute); err != nil {
		return err
	}
	b.waitQuiet("pacing")
	dist := startDisturbance()
	logf("pacing: resume all; about %v of sends", b.backlog)
	resumed := make([]time.Time, len(cases))
	for i := range cases {
		resumed[i] = time.Now()
		if err := hp.resume(sink.addrs[i]); err != nil {
			return err
		}
	}
	for i, c := range cases {
		if _, err := waitCount(sink.addrs[i], int64(ns[i]), 2*b.backlog+time.Minute); err != nil {
			return err
		}
		times, err := sinkTimes(sink.addrs[i])
		if err != nil {
			return err
		}
		slices.Sort(times)
		r := &pacingResult{c: c, n: ns[i], got: len(times)}
		for _, w := range []float64{0.1, 1, 5} {
			n := maxInWindow(times, w)
			bound := float64(c.burst) + c.perS*w
			r.windows = append(r.windows, windowCheck{w: w, max: n, bound: bound, slack: max(0, (float64(n)-bound)/c.perS)})
		}
		n, B := len(times), c.burst
		if n > B+1 {
			r.steadyRate = float64(n-1-B) / (float64(times[n-1]-times[B]) / 1e9)
		}
		r.overall = float64(n) / (float64(times[n-1]-resumed[i].UnixNano()) / 1e9)
		b.rep.pacing = append(b.rep.pacing, r)
	}
	b.rep.pacingOthers, b.rep.pacingSteal = dist.stop()
	return nil
}

// maxInWindow is the most arrivals in any half-open window [t, t+w); the
// maximum is reached by a window that starts at an arrival.
func maxInWindow(times []int64, w float64) int {
	span := int64(w * 1e9)
	best, j := 0, 0
	for i := range times {
		for j < len(times) && times[j]-times[i] < span {
			j++
		}
		best = max(best, j-i)
	}
	return best
}

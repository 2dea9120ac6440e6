package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
	"github.com/hookpace/hookpace/pacer"
)

// starvedNode is a node whose three replicas share a host through real Redis on
// an injected clock, and whose CPU is taken from them at times: while
// starved, a replica's asker still gets an answer (once: the pump that
// would use it and ask again does not run), but nothing is sent until
// the starvation ends. Sends arrive at the receiver when they are made.
type starvedNode struct {
	t        *testing.T
	clk      *clock
	host     string
	lim      pacer.Limits
	life     time.Duration
	replicas []*starvedReplica
	sends    []arrival
}

type starvedReplica struct {
	lim *Limiter
	h   Host
	due int
	out []starvedAttempt
}

type starvedAttempt struct {
	lease     string
	sent, end time.Time
}

// run gives each replica each webhooks due at every wave and sends them,
// a step of the clock at a time, the node starved while starved says so;
// it returns the arrivals.
func (b *starvedNode) run(waves []time.Duration, each int, starved func(time.Duration) bool) []arrival {
	start := b.clk.Now()
	for step := 0; ; step++ {
		now := b.clk.Now()
		left := 0
		for len(waves) > 0 && now.Sub(start) >= waves[0] {
			for _, r := range b.replicas {
				r.due += each
			}
			waves = waves[1:]
		}
		for _, r := range b.replicas {
			b.step(r, now, starved(now.Sub(start)))
			left += r.due + len(r.out)
		}
		if left == 0 && len(waves) == 0 {
			return b.sends
		}
		if step > 100_000 {
			b.t.Fatalf("%d webhooks not sent after %v", left, now.Sub(start))
		}
		b.clk.Add(5 * time.Millisecond)
	}
}

func (b *starvedNode) step(r *starvedReplica, now time.Time, starved bool) {
	for len(r.out) > 0 && !r.out[0].end.After(now) {
		a := r.out[0]
		r.out = r.out[1:]
		r.h.Released(now, a.lease, pacer.Result{Outcome: pacer.Success, SentAt: a.sent}, false)
	}
	if !starved {
		for r.due > 0 {
			ok, carry, _ := r.h.Ready(now)
			if !ok {
				break
			}
			lease := r.h.Use(carry)
			r.due--
			r.out = append(r.out, starvedAttempt{lease: lease, sent: now, end: now.Add(20 * time.Millisecond)})
			b.sends = append(b.sends, arrival{at: now, host: b.host})
		}
		r.h.Pumped(now, func() bool { return r.due == 0 })
	}
	if starved && len(r.h.grants) > 0 {
		return // its grants wait for the pump
	}
	req, ok := r.h.Ask(now, Need{Host: b.host, Limits: b.lim, Live: len(b.replicas), Shared: true,
		Due: r.due, InFlight: len(r.out)})
	if !ok {
		return
	}
	g, err := r.lim.Ask(context.Background(), req)
	if err != nil {
		b.t.Fatal(err)
	}
	r.h.Answered(now, req, &g, false, EndsAfter(now, b.life))
}

func newStarvedNode(t *testing.T, srv *redistest.Server, host string, life time.Duration) *starvedNode {
	clk := newClock()
	b := &starvedNode{t: t, clk: clk, host: host, lim: pacer.Limits{Rate: 20, Burst: 10, Concurrency: 10}, life: life}
	for _, name := range []string{"a", "b", "c"} {
		b.replicas = append(b.replicas, &starvedReplica{lim: newLimiter(t, srv, clk, name)})
	}
	return b
}

// Every replica gets 10 webhooks due every 3 s (about 1.1 s of sending at
// 20/s for the three: each wave starts with a full bucket), and the node
// is starved for 600 ms from the start of the second wave, for 300 ms
// from the third's and for 40 ms of every 100 ms through the fourth.
var (
	waves    = []time.Duration{0, 3 * time.Second, 6 * time.Second, 9 * time.Second}
	perWave  = 10
	starveAt = func(d time.Duration) bool {
		switch {
		case d >= 3*time.Second && d < 3600*time.Millisecond:
			return true
		case d >= 6*time.Second && d < 6300*time.Millisecond:
			return true
		case d >= 9*time.Second && d < 11*time.Second:
			return d%(100*time.Millisecond) < 40*time.Millisecond
		}
		return false
	}
)

// overBound is the first window in which more arrived than B + R·W, and
// how many.
func overBound(as []arrival, lim pacer.Limits) (time.Duration, int, bool) {
	for _, w := range []time.Duration{50 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second} {
		if n := maxPerWindow(as, w); float64(n) > float64(lim.Burst)+lim.Rate*w.Seconds() {
			return w, n, true
		}
	}
	return 0, 0, false
}

// TestLateSendsKeepBound: three replicas of a starved node (their grants
// used up to 600 ms after Redis made them) send 120 webhooks at 20/s,
// burst 10, in waves: with grants that live GrantLife, every window of
// the receiver holds at most B + R·W, and everything is sent. The same
// schedule with grants that never expire crosses the bound: the grants
// made while the node was starved land with the next second's.
func TestLateSendsKeepBound(t *testing.T) {
	srv := redistest.Start(t)
	lim := pacer.Limits{Rate: 20, Burst: 10, Concurrency: 10}
	b := newStarvedNode(t, srv, "late.example", GrantLife(lim))
	got := b.run(waves, perWave, starveAt)
	if want := 3 * perWave * len(waves); len(got) != want {
		t.Fatalf("%d sent, want %d", len(got), want)
	}
	if w, n, over := overBound(got, lim); over {
		t.Fatalf("%d arrivals in %v, bound %v", n, w, float64(lim.Burst)+lim.Rate*w.Seconds())
	}
	t.Logf("with grants of %v: busiest second %d", GrantLife(lim), maxPerWindow(got, time.Second))

	never := newStarvedNode(t, srv, "never.example", time.Hour)
	got = never.run(waves, perWave, starveAt)
	w, n, over := overBound(got, lim)
	if !over {
		t.Fatalf("grants that never expire kept the bound too (busiest second %d): the schedule starves nothing", maxPerWindow(got, time.Second))
	}
	t.Logf("with grants that never expire: %d arrivals in %v", n, w)
}

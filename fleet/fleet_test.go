package fleet

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
	"github.com/hookpace/hookpace/pacer"
)

// clock is a test clock shared by the replicas of one test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_700_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newLimiter(t *testing.T, srv *redistest.Server, clk *clock, replica string) *Limiter {
	t.Helper()
	l, err := New(Options{URL: srv.URL(), KeyPrefix: "t", Replica: replica, Now: clk.Now,
		Timeout: 2 * time.Second, LeasePeriod: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func ask(t *testing.T, l *Limiter, lim pacer.Limits, want int, rel ...Release) Grant {
	t.Helper()
	g, err := l.Ask(context.Background(), Request{Host: "partner.example", Limits: lim, Want: want, Releases: rel})
	if err != nil {
		t.Fatalf("ask: %v", err)
	}
	return g
}

var lim = pacer.Limits{Rate: 10, Burst: 5, Concurrency: 3}

func TestBurstThenRate(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a, b := newLimiter(t, srv, clk, "a"), newLimiter(t, srv, clk, "b")
	l := lim
	l.Concurrency = 100
	if g := ask(t, a, l, 3); len(g.Leases) != 3 || g.Wait != 0 {
		t.Fatalf("first ask: %+v, want 3 leases", g)
	}
	g := ask(t, b, l, 10) // the other replica gets what is left of the burst
	if len(g.Leases) != 2 || g.Wait <= 0 || g.Poll {
		t.Fatalf("second ask: %+v, want 2 leases and a wait", g)
	}
	if g := ask(t, a, l, 1); len(g.Leases) != 0 || g.Reason != "rate" {
		t.Fatalf("empty bucket granted: %+v", g)
	}
	clk.Add(g.Wait)
	if g := ask(t, a, l, 5); len(g.Leases) != 1 {
		t.Fatalf("after the wait: %+v, want 1 lease", g)
	}
}

// TestWindowBound sends as fast as two replicas are allowed and checks
// that no window of W holds more than B + R·W sends.
func TestWindowBound(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	rs := []*Limiter{newLimiter(t, srv, clk, "a"), newLimiter(t, srv, clk, "b")}
	l := pacer.Limits{Rate: 20, Burst: 10, Concurrency: 1000}
	start := clk.Now()
	var sends []time.Duration
	for i := 0; clk.Now().Sub(start) < 5*time.Second; i++ {
		g := ask(t, rs[i%2], l, 4)
		for range g.Leases {
			sends = append(sends, clk.Now().Sub(start))
		}
		clk.Add(max(g.Wait/2, time.Millisecond)) // ask early, half the time
	}
	if len(sends) < 90 {
		t.Fatalf("only %d sends in 5 s at 20/s burst 10", len(sends))
	}
	for _, w := range []time.Duration{100 * time.Millisecond, time.Second, 3 * time.Second} {
		bound := 10 + int(20*w.Seconds())
		for i := range sends {
			n := 0
			for j := i; j < len(sends) && sends[j]-sends[i] < w; j++ {
				n++
			}
			if n > bound {
				t.Fatalf("%d sends in %v from %v, bound %d", n, w, sends[i], bound)
			}
		}
	}
}

func TestConcurrencyLeases(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a, b := newLimiter(t, srv, clk, "a"), newLimiter(t, srv, clk, "b")
	l := lim
	l.Rate, l.Burst = 1000, 100
	ga := ask(t, a, l, 2)
	gb := ask(t, b, l, 2)
	if len(ga.Leases) != 2 || len(gb.Leases) != 1 || !gb.Poll || gb.InFlight != 3 {
		t.Fatalf("a %+v, b %+v: want 2 + 1 of 3 slots, b polls", ga, gb)
	}
	// a releases one with its next ask, and b gets it.
	ga = ask(t, a, l, 0, Release{Lease: ga.Leases[0], Outcome: pacer.Success})
	gb2 := ask(t, b, l, 2)
	if len(gb2.Leases) != 1 {
		t.Fatalf("after a release: %+v, want 1 lease", gb2)
	}
	// a dies holding its other lease: it is free one lease period later,
	// unless renewed.
	clk.Add(9 * time.Second)
	if err := b.Renew(context.Background(), "partner.example", append(gb.Leases, gb2.Leases...)); err != nil {
		t.Fatal(err)
	}
	clk.Add(2 * time.Second)
	if g := ask(t, b, l, 5); len(g.Leases) != 1 || g.InFlight != 3 {
		t.Fatalf("after a's lease expired: %+v, want 1 more (b's renewed 2 still held)", g)
	}
}

func TestHoldShared(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a, b := newLimiter(t, srv, clk, "a"), newLimiter(t, srv, clk, "b")
	l := lim
	l.HoldSchedule = []time.Duration{time.Second, 4 * time.Second}
	ga := ask(t, a, l, 2)
	// a's first attempt gets 429 Retry-After: 5.
	g := ask(t, a, l, 0, Release{Lease: ga.Leases[0], Outcome: pacer.Throttled, RetryAfter: 5 * time.Second, HasRetry: true, Age: 10 * time.Millisecond})
	if g.HeldFor != 5*time.Second || g.C429 != 1 {
		t.Fatalf("after 429: %+v", g)
	}
	clk.Add(4 * time.Second)
	if g := ask(t, b, l, 1); len(g.Leases) != 0 || g.Wait != time.Second || g.Reason != "429 Retry-After" {
		t.Fatalf("b during a's hold: %+v", g)
	}
	// a's second attempt, sent before the hold began, is a straggler: no
	// escalation.
	g = ask(t, a, l, 0, Release{Lease: ga.Leases[1], Outcome: pacer.Throttled, Age: 5 * time.Second})
	if g.C429 != 1 || g.HeldFor != time.Second {
		t.Fatalf("straggler: %+v", g)
	}
	clk.Add(time.Second)
	gb := ask(t, b, l, 3)
	if len(gb.Leases) != 1 {
		t.Fatalf("after the hold: %+v, want one lease (gentle resume)", gb)
	}
	// Another 429 without Retry-After escalates along the schedule.
	g = ask(t, b, l, 0, Release{Lease: gb.Leases[0], Outcome: pacer.Throttled})
	if g.C429 != 2 || g.HeldFor != 4*time.Second || g.Reason != "429" {
		t.Fatalf("second 429: %+v", g)
	}
	clk.Add(4 * time.Second)
	g = ask(t, a, l, 1)
	g = ask(t, a, l, 0, Release{Lease: g.Leases[0], Outcome: pacer.Success})
	if g.C429 != 0 {
		t.Fatalf("a success did not reset the count: %+v", g)
	}
}

func TestPauseShared(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a, b := newLimiter(t, srv, clk, "a"), newLimiter(t, srv, clk, "b")
	ctx := context.Background()
	if err := a.Pause(ctx, "partner.example"); err != nil {
		t.Fatal(err)
	}
	if g := ask(t, b, lim, 1); len(g.Leases) != 0 || !g.Paused || !g.Poll {
		t.Fatalf("paused elsewhere: %+v", g)
	}
	if err := b.Resume(ctx, "partner.example"); err != nil {
		t.Fatal(err)
	}
	if g := ask(t, a, lim, 1); len(g.Leases) != 1 || g.Paused {
		t.Fatalf("resumed elsewhere: %+v", g)
	}
}

func TestBreakerShared(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a, b := newLimiter(t, srv, clk, "a"), newLimiter(t, srv, clk, "b")
	l := lim
	l.BreakerFailures, l.BreakerCooldown = 2, 30*time.Second
	ga, gb := ask(t, a, l, 1), ask(t, b, l, 1)
	ask(t, a, l, 0, Release{Lease: ga.Leases[0], Outcome: pacer.Failure})
	g := ask(t, b, l, 1, Release{Lease: gb.Leases[0], Outcome: pacer.Failure})
	if g.Breaker != "open" || len(g.Leases) != 0 || g.Wait != 30*time.Second {
		t.Fatalf("after 2 failures on 2 replicas: %+v", g)
	}
	clk.Add(30 * time.Second)
	probe := ask(t, a, l, 3)
	if probe.Breaker != "half-open" || len(probe.Leases) != 1 {
		t.Fatalf("half-open: %+v, want one probe", probe)
	}
	if g := ask(t, b, l, 1); len(g.Leases) != 0 || !g.Poll {
		t.Fatalf("second probe granted: %+v", g)
	}
	g = ask(t, a, l, 0, Release{Lease: probe.Leases[0], Outcome: pacer.Failure})
	if g.Breaker != "open" {
		t.Fatalf("failed probe: %+v, want open again", g)
	}
	clk.Add(30 * time.Second)
	probe = ask(t, b, l, 1)
	g = ask(t, b, l, 3, Release{Lease: probe.Leases[0], Outcome: pacer.Success})
	if g.Breaker != "closed" || len(g.Leases) != 3 {
		t.Fatalf("after a good probe: %+v", g)
	}
}

func TestAdaptiveShared(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a, b := newLimiter(t, srv, clk, "a"), newLimiter(t, srv, clk, "b")
	l := pacer.Limits{Rate: 100, Burst: 10, Concurrency: 100, Adaptive: true, MinRate: 10,
		HoldSchedule: []time.Duration{time.Second}}
	g := ask(t, a, l, 1)
	g = ask(t, a, l, 0, Release{Lease: g.Leases[0], Outcome: pacer.Throttled})
	if g.Rate != 50 {
		t.Fatalf("rate after a 429: %v, want 50", g.Rate)
	}
	clk.Add(time.Second)
	for range 10 { // one streak of successes, on the other replica
		g = ask(t, b, l, 1)
		if len(g.Leases) != 1 {
			clk.Add(g.Wait)
			g = ask(t, b, l, 1)
		}
		g = ask(t, b, l, 0, Release{Lease: g.Leases[0], Outcome: pacer.Success})
	}
	if g.Rate != 55 {
		t.Fatalf("rate after 10 successes: %v, want 55", g.Rate)
	}
}

package fleet

import (
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
	"github.com/hookpace/hookpace/pacer"
)

// TestDNSHoldShared: a name that does not resolve at one replica holds the
// host at all of them (reason dns), by the schedule, escalating per episode
// but not for a straggler, and without a rate cut; an answer resets it.
func TestDNSHoldShared(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a, b := newLimiter(t, srv, clk, "a"), newLimiter(t, srv, clk, "b")
	l := lim
	l.Adaptive = true
	l.HoldSchedule = []time.Duration{time.Second, 4 * time.Second}
	ga := ask(t, a, l, 2)
	g := ask(t, a, l, 0, Release{Lease: ga.Leases[0], Outcome: pacer.Unresolved, RetryAfter: -1, Age: 10 * time.Millisecond})
	if g.HeldFor != time.Second || g.C429 != 0 || g.Rate != 10 {
		t.Fatalf("after NXDOMAIN: %+v; want held 1 s, no 429 counted, rate 10", g)
	}
	if g := ask(t, b, l, 1); len(g.Leases) != 0 || g.Wait != time.Second || g.Reason != pacer.HoldDNS {
		t.Fatalf("b during a's dns hold: %+v", g)
	}
	// a's second attempt, sent before the hold began: no escalation.
	if g := ask(t, a, l, 0, Release{Lease: ga.Leases[1], Outcome: pacer.Unresolved, Age: time.Second}); g.HeldFor != time.Second {
		t.Fatalf("straggler: %+v", g)
	}
	clk.Add(time.Second)
	gb := ask(t, b, l, 1)
	if len(gb.Leases) != 1 {
		t.Fatalf("after the hold: %+v", gb)
	}
	if g := ask(t, b, l, 0, Release{Lease: gb.Leases[0], Outcome: pacer.Unresolved}); g.HeldFor != 4*time.Second || g.Reason != pacer.HoldDNS {
		t.Fatalf("second NXDOMAIN: %+v, want held 4 s for dns", g)
	}
	clk.Add(4 * time.Second)
	g = ask(t, a, l, 1)
	g = ask(t, a, l, 0, Release{Lease: g.Leases[0], Outcome: pacer.Answered})
	clk.Add(time.Second)
	g = ask(t, a, l, 1)
	if g = ask(t, a, l, 0, Release{Lease: g.Leases[0], Outcome: pacer.Unresolved}); g.HeldFor != time.Second {
		t.Fatalf("NXDOMAIN after an answer: %+v, want the schedule's first step again", g)
	}
}

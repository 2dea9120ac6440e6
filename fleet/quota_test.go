package fleet

import (
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
	"github.com/hookpace/hookpace/pacer"
)

// A partner's used-up quota, reported by one replica as a release that
// sent nothing with a hold, holds the host for every replica ("quota"),
// with neither a 429's escalation nor its rate cut, and it never shortens
// a longer hold.
func TestQuotaHoldShared(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a, b := newLimiter(t, srv, clk, "a"), newLimiter(t, srv, clk, "b")
	l := lim
	l.Adaptive = true
	ga := ask(t, a, l, 1)
	g := ask(t, a, l, 0, Release{Lease: ga.Leases[0], Outcome: pacer.Success},
		Release{Outcome: pacer.NoSend, RetryAfter: 800 * time.Millisecond, HasRetry: true})
	if g.HeldFor != 800*time.Millisecond || g.C429 != 0 || g.Rate != l.Rate {
		t.Fatalf("after a quota hold: %+v", g)
	}
	clk.Add(300 * time.Millisecond)
	if g := ask(t, b, l, 1); len(g.Leases) != 0 || g.Wait != 500*time.Millisecond || g.Reason != "quota" {
		t.Fatalf("b during a's quota hold: %+v", g)
	}
	// A shorter quota hold does not cut it short.
	g = ask(t, b, l, 0, Release{Outcome: pacer.NoSend, RetryAfter: 100 * time.Millisecond, HasRetry: true})
	if g.HeldFor != 500*time.Millisecond {
		t.Fatalf("a shorter quota hold: %+v", g)
	}
	clk.Add(500 * time.Millisecond)
	if g := ask(t, b, l, 1); len(g.Leases) != 1 {
		t.Fatalf("after the hold: %+v", g)
	}
}

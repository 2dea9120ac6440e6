package fleet

import (
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
	"github.com/hookpace/hookpace/pacer"
)

// TestFairShares: replica a holds all 8 slots of a host, keeping their
// leases; b asks and is refused. While b waits, a gets no more slots and
// no tokens ahead for its kept leases (so its client gives them back);
// b then gets its share (4), and a its own 4 once it waits too. A
// replica alone is not held to any share.
func TestFairShares(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a, b := newLimiter(t, srv, clk, "a"), newLimiter(t, srv, clk, "b")
	lim := pacer.Limits{Rate: 1000, Burst: 100, Concurrency: 8}
	g := askHost(t, a, "p.example", lim, 8)
	if len(g.Leases) != 8 {
		t.Fatalf("a alone: %+v", g)
	}
	if g := askHost(t, b, "p.example", lim, 8); len(g.Leases) != 0 || g.Reason != "concurrency" || !g.Poll {
		t.Fatalf("b with every slot taken: %+v", g)
	}
	// a's first attempt succeeds: it keeps the lease and asks a token
	// ahead for it, and one more lease. b is waiting: no token (all
	// slots are taken: no lease either).
	got := askOf(t, a, Request{Host: "p.example", Limits: lim, Want: 1, Ahead: 1,
		Releases: []Release{{Lease: g.Leases[0], Outcome: pacer.Success, Keep: true}}})
	if len(got.Leases) != 0 || got.Tokens != 0 {
		t.Fatalf("a over its share while b waits: %+v, want no lease and no token ahead", got)
	}
	// a's client gives back the kept lease, and 4 more finish: a holds
	// 3, its share is 4 of 8 while b waits.
	var rel []Release
	for _, l := range g.Leases[:5] {
		rel = append(rel, Release{Lease: l, Outcome: pacer.Success})
	}
	got = askOf(t, a, Request{Host: "p.example", Limits: lim, Want: 5, Releases: rel})
	if len(got.Leases) != 1 || got.Reason != "fair share" || !got.Poll {
		t.Fatalf("a with 3 of 8 while b waits: %+v, want 1 (its share is 4)", got)
	}
	if got := askHost(t, b, "p.example", lim, 8); len(got.Leases) != 4 {
		t.Fatalf("b's share: %+v, want 4", got)
	}
	// Without a waiter, a replica takes what it wants.
	clk.Add(11 * time.Second) // the waiters' entries lapse (1 s), so do the leases (10 s)
	if got := askHost(t, a, "p.example", lim, 8); len(got.Leases) != 8 {
		t.Fatalf("a alone again: %+v, want 8", got)
	}
}

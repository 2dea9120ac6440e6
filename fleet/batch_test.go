package fleet

import (
	"context"
	"fmt"
	"testing"

	"github.com/hookpace/hookpace/internal/redistest"
	"github.com/hookpace/hookpace/pacer"
)

// TestAskManyOneRoundTrip: the asks of several hosts go in one round trip
// and each is decided as if asked alone; two asks of one host in the same
// round trip are decided in order (the second sees what the first took and
// released).
func TestAskManyOneRoundTrip(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a := newLimiter(t, srv, clk, "a")
	obs := &countObserver{}
	a.obs = obs
	l := lim // concurrency 3
	l.Rate, l.Burst = 1000, 100
	ctx := context.Background()
	reqs := []Request{
		{Host: "one.example", Limits: l, Want: 2},
		{Host: "two.example", Limits: l, Want: 5},
		{Host: "one.example", Limits: l, Want: 5},
	}
	gs, err := a.AskMany(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 3 || len(gs[0].Leases) != 2 || len(gs[1].Leases) != 3 || len(gs[2].Leases) != 1 ||
		gs[2].InFlight != 3 || !gs[2].Poll {
		t.Fatalf("grants %+v: want 2, 3 (concurrency) and the 1 slot one.example has left", gs)
	}
	// A script the server did not know yet costs one more round trip
	// (NOSCRIPT, then EVAL), never an error.
	if obs.trips.Load() != 2 || obs.errs.Load() != 0 {
		t.Fatalf("round trips %d (errors %d), want 2 (EVALSHA, then EVAL) and no error", obs.trips.Load(), obs.errs.Load())
	}
	// Lease ids are unique over the whole round trip.
	seen := map[string]bool{}
	for _, g := range gs {
		for _, id := range g.Leases {
			if seen[id] {
				t.Fatalf("lease %s granted twice", id)
			}
			seen[id] = true
		}
	}
	// Releases and asks of one host in one round trip: in order.
	rel := []Release{{Lease: gs[0].Leases[0], Outcome: pacer.Success}, {Lease: gs[2].Leases[0], Outcome: pacer.Success}}
	gs2, err := a.AskMany(ctx, []Request{
		{Host: "one.example", Limits: l, Want: 3}, // none free yet
		{Host: "one.example", Limits: l, Releases: rel},
		{Host: "one.example", Limits: l, Want: 3}, // the two just released
		{Host: "two.example", Limits: l, Want: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := []int{len(gs2[0].Leases), len(gs2[1].Leases), len(gs2[2].Leases), len(gs2[3].Leases)}; fmt.Sprint(n) != "[0 0 2 0]" {
		t.Fatalf("leases granted %v, want [0 0 2 0]: %+v", n, gs2)
	}
	if obs.trips.Load() != 3 {
		t.Fatalf("round trips %d, want 3", obs.trips.Load())
	}
}

// TestAskManyScriptsFlushed: a Redis that forgot the scripts (restarted,
// or SCRIPT FLUSH) answers NOSCRIPT; every ask of the round trip is sent
// again with EVAL, and all are answered.
func TestAskManyScriptsFlushed(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a := newLimiter(t, srv, clk, "a")
	ctx := context.Background()
	reqs := make([]Request, 20)
	for i := range reqs {
		reqs[i] = Request{Host: fmt.Sprintf("h%d.example", i), Limits: lim, Want: 1}
	}
	if _, err := a.AskMany(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	if err := a.rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	obs := &countObserver{}
	a.obs = obs
	gs, err := a.AskMany(ctx, reqs)
	if err != nil {
		t.Fatalf("after SCRIPT FLUSH: %v", err)
	}
	for i, g := range gs {
		if len(g.Leases) != 1 || g.InFlight != 2 {
			t.Fatalf("host %d after SCRIPT FLUSH: %+v, want its second lease", i, g)
		}
	}
	if obs.trips.Load() != 2 || obs.errs.Load() != 0 || obs.fallbacks.Load() != 0 {
		t.Fatalf("round trips %d, errors %d, fallbacks %d: want 2, 0, 0", obs.trips.Load(), obs.errs.Load(), obs.fallbacks.Load())
	}
}

// TestAskManyRedisDown: a round trip that fails answers none of its asks
// and degrades the limiter once.
func TestAskManyRedisDown(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a := newLimiter(t, srv, clk, "a")
	obs := &countObserver{}
	a.obs = obs
	srv.Kill()
	gs, err := a.AskMany(context.Background(), []Request{{Host: "a.example", Limits: lim, Want: 1}, {Host: "b.example", Limits: lim, Want: 1}})
	if err == nil || gs != nil {
		t.Fatalf("redis down: %v, %v", gs, err)
	}
	if deg, _, _ := a.State(); !deg || obs.fallbacks.Load() != 1 || obs.errs.Load() != 1 {
		t.Fatalf("degraded %v, fallbacks %d, errors %d: want degraded, 1, 1", deg, obs.fallbacks.Load(), obs.errs.Load())
	}
}

package fleet

import (
	"context"
	"fmt"
	"testing"
	"time"

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

// TestTokensAhead: tokens taken ahead come out of the shared bucket (the
// other replica gets what is left), are taken even when every slot is
// held, never while the host is held, and tokens given back are in the
// bucket again.
func TestTokensAhead(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a, b := newLimiter(t, srv, clk, "a"), newLimiter(t, srv, clk, "b")
	l := pacer.Limits{Rate: 10, Burst: 10, Concurrency: 2} // capacity 10: nothing held back at 10/s
	ctx := context.Background()
	g, err := a.AskMany(ctx, []Request{{Host: "h", Limits: l, Want: 2, Ahead: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if len(g[0].Leases) != 2 || g[0].Tokens != 3 {
		t.Fatalf("a: %+v, want 2 leases and 3 tokens ahead", g[0])
	}
	// Every slot is held, yet tokens ahead are granted (for a's kept leases).
	if g := askOf(t, b, Request{Host: "h", Limits: l, Want: 1, Ahead: 10}); len(g.Leases) != 0 || g.Tokens != 5 {
		t.Fatalf("b: %+v, want no lease (concurrency) and the 5 tokens left", g)
	}
	if g := askOf(t, b, Request{Host: "h", Limits: l, Ahead: 1}); g.Tokens != 0 {
		t.Fatalf("empty bucket gave %d tokens", g.Tokens)
	}
	if g := askOf(t, a, Request{Host: "h", Limits: l, GiveBack: 3}); g.Tokens != 0 {
		t.Fatalf("give back: %+v", g)
	}
	if g := askOf(t, b, Request{Host: "h", Limits: l, Ahead: 10}); g.Tokens != 3 {
		t.Fatalf("after a gave 3 back: %d tokens, want 3", g.Tokens)
	}
	// A 429 holds the host: no token ahead until the hold ends.
	clk.Add(2 * time.Second)
	rel := Release{Lease: g[0].Leases[0], Outcome: pacer.Throttled, RetryAfter: time.Second, HasRetry: true}
	if g := askOf(t, a, Request{Host: "h", Limits: l, Ahead: 5, Releases: []Release{rel}}); g.Tokens != 0 || g.HeldFor <= 0 {
		t.Fatalf("held host: %+v, want no token", g)
	}
}

// TestKeepRenewsLease: a release with Keep reports the attempt and keeps
// its lease counted, renewed for a lease period from then.
func TestKeepRenewsLease(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a, b := newLimiter(t, srv, clk, "a"), newLimiter(t, srv, clk, "b")
	l := pacer.Limits{Rate: 1000, Burst: 100, Concurrency: 1}
	g := ask(t, a, l, 1)
	if len(g.Leases) != 1 {
		t.Fatalf("%+v", g)
	}
	clk.Add(9 * time.Second) // the lease period is 10 s
	keep := Release{Lease: g.Leases[0], Outcome: pacer.Success, Keep: true}
	if g := askOf(t, a, Request{Host: "partner.example", Limits: l, Releases: []Release{keep}}); g.InFlight != 1 {
		t.Fatalf("kept lease not counted: %+v", g)
	}
	clk.Add(9 * time.Second) // 18 s after the grant, 9 s after the renewal
	if g := askOf(t, b, Request{Host: "partner.example", Limits: l, Want: 1}); len(g.Leases) != 0 || g.Reason != "concurrency" {
		t.Fatalf("b got the kept slot: %+v", g)
	}
	clk.Add(2 * time.Second) // not renewed again: it expires
	if g := askOf(t, b, Request{Host: "partner.example", Limits: l, Want: 1}); len(g.Leases) != 1 {
		t.Fatalf("kept lease did not expire a lease period after its renewal: %+v", g)
	}
}

func TestReserve(t *testing.T) {
	for _, tc := range []struct {
		lim  pacer.Limits
		live int
		want int
	}{
		{pacer.Limits{Rate: 1000000, Burst: 1000}, 1, 250}, // holds back burst/2 = 500
		{pacer.Limits{Rate: 1000000, Burst: 1000}, 2, 125},
		{pacer.Limits{Rate: 1000000, Burst: 20}, 1, 5},
		{pacer.Limits{Rate: 1000, Burst: 100}, 1, 12}, // 25 ms at 1000/s
		{pacer.Limits{Rate: 20, Burst: 10}, 3, 0},     // nothing held back
	} {
		if got := Reserve(tc.lim, tc.live); got != tc.want {
			t.Errorf("Reserve(%+v, %d) = %d, want %d", tc.lim, tc.live, got, tc.want)
		}
	}
}

func askOf(t *testing.T, l *Limiter, req Request) Grant {
	t.Helper()
	g, err := l.Ask(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

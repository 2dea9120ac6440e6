package fleet

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
	"github.com/hookpace/hookpace/pacer"
)

func TestShare(t *testing.T) {
	l := pacer.Limits{Rate: 20, MinRate: 3, Burst: 10, Concurrency: 4}
	for _, tc := range []struct {
		live, index int
		rate        float64
		burst, conc int
	}{
		{0, 0, 20, 10, 4},
		{1, 0, 20, 10, 4},
		{2, 1, 10, 5, 2},
		{3, 0, 20.0 / 3, 4, 2},
		{3, 1, 20.0 / 3, 3, 1},
		{3, 2, 20.0 / 3, 3, 1},
		{5, 4, 4, 2, 0},
		{20, 19, 1, 1, 0},
	} {
		s := Share(l, tc.live, tc.index)
		if s.Rate != tc.rate || s.Burst != tc.burst || s.Concurrency != tc.conc {
			t.Errorf("Share(%d, %d) = rate %v burst %d concurrency %d, want %v %d %d",
				tc.live, tc.index, s.Rate, s.Burst, s.Concurrency, tc.rate, tc.burst, tc.conc)
		}
	}
}

// TestShareSums: for every cap and count of live replicas, the shares of
// the concurrency add up to the cap, and of the burst to the burst (or to
// one each, when the burst is smaller than the replicas).
func TestShareSums(t *testing.T) {
	for live := 1; live <= 9; live++ {
		for n := 1; n <= 20; n++ {
			conc, burst := 0, 0
			for i := range live {
				s := Share(pacer.Limits{Rate: 10, Burst: n, Concurrency: n}, live, i)
				conc += s.Concurrency
				burst += s.Burst
			}
			if conc != n || burst != max(n, live) {
				t.Errorf("%d replicas, cap and burst %d: shares add up to %d and %d", live, n, conc, burst)
			}
		}
	}
}

// TestShareIndex: the heartbeat gives each live replica its index among
// them by name, so that their shares of a cap of 2 over 3 replicas add
// up to 2.
func TestShareIndex(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	var ls []*Limiter
	for _, name := range []string{"c", "a", "b"} {
		ls = append(ls, newLimiter(t, srv, clk, name))
	}
	for range 2 { // the first beats saw fewer replicas
		for _, l := range ls {
			if err := l.Heartbeat(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	sum := 0
	for i, want := range []int{2, 0, 1} {
		live, index := ls[i].ShareOf()
		if live != 3 || index != want {
			t.Fatalf("%s: live %d index %d, want 3 and %d", ls[i].Replica(), live, index, want)
		}
		sum += Share(pacer.Limits{Rate: 10, Burst: 2, Concurrency: 2}, live, index).Concurrency
	}
	if sum != 2 {
		t.Fatalf("shares of a cap of 2 add up to %d", sum)
	}
}

type countObserver struct{ trips, errs, fallbacks atomic.Int64 }

func (o *countObserver) FleetRoundTrip(_ string, _ time.Duration, err error) {
	o.trips.Add(1)
	if err != nil {
		o.errs.Add(1)
	}
}
func (o *countObserver) FleetFallback() { o.fallbacks.Add(1) }

// TestRedisDown: an error degrades the limiter once (one fallback however
// many failures), keeps the last live count for the share, and the next
// heartbeat that gets an answer makes it shared again, with the scripts
// loaded again into the restarted (empty) server.
func TestRedisDown(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	obs := &countObserver{}
	a := newLimiter(t, srv, clk, "a")
	a.obs = obs
	b, c := newLimiter(t, srv, clk, "b"), newLimiter(t, srv, clk, "c")
	ctx := context.Background()
	for _, l := range []*Limiter{b, c, a} {
		if err := l.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if deg, live, _ := a.State(); deg || live != 3 {
		t.Fatalf("state: degraded %v live %d, want shared, 3", deg, live)
	}
	var changes atomic.Int64
	a.OnChange(func() { changes.Add(1) })
	ask(t, a, lim, 1)

	srv.Kill()
	for range 3 {
		if _, err := a.Ask(ctx, Request{Host: "partner.example", Limits: lim, Want: 1}); err == nil {
			t.Fatal("ask answered with redis down")
		}
	}
	if err := a.Heartbeat(ctx); err == nil {
		t.Fatal("heartbeat answered with redis down")
	}
	deg, live, why := a.State()
	if !deg || live != 3 || why == "" {
		t.Fatalf("state with redis down: degraded %v live %d why %q", deg, live, why)
	}
	if obs.fallbacks.Load() != 1 || changes.Load() != 1 || obs.errs.Load() != 4 {
		t.Fatalf("fallbacks %d changes %d errors %d, want 1 1 4", obs.fallbacks.Load(), changes.Load(), obs.errs.Load())
	}

	srv.Restart()
	if err := a.Heartbeat(ctx); err != nil {
		t.Fatalf("heartbeat after restart: %v", err)
	}
	// On its share of 3 until the fleet rejoins, though Redis, restarted
	// empty, counts only a: b and c are not back, so at the deadline.
	if deg, live, _ := a.State(); !deg || live != 3 || !a.Returning() {
		t.Fatalf("after restart: degraded %v live %d returning %v, want returning with 3 until the rejoin", deg, live, a.Returning())
	}
	clk.Add(a.rejoinWait())
	if err := a.Heartbeat(ctx); err != nil {
		t.Fatalf("heartbeat at the rejoin: %v", err)
	}
	if deg, live, _ := a.State(); deg || live != 1 {
		t.Fatalf("after restart: degraded %v live %d, want shared, 1 (only a announced itself)", deg, live)
	}
	if changes.Load() != 3 { // degraded, returning, shared
		t.Fatalf("changes %d, want 3", changes.Load())
	}
	// NOSCRIPT, then EVAL: answered; the time a paced alone is charged to
	// the bucket, so the answer may be to wait.
	if g := ask(t, a, lim, 1); len(g.Leases) != 1 && g.Reason != "rate" {
		t.Fatalf("ask after restart: %+v", g)
	}
}

// TestReplicasExpire: a replica that stops heartbeating drops out of the
// live count one lease period later; one that closes leaves at once.
func TestReplicasExpire(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a, b, c := newLimiter(t, srv, clk, "a"), newLimiter(t, srv, clk, "b"), newLimiter(t, srv, clk, "c")
	ctx := context.Background()
	for _, l := range []*Limiter{a, b, c} {
		l.Heartbeat(ctx)
	}
	c.Close()
	a.Heartbeat(ctx)
	if _, live, _ := a.State(); live != 2 {
		t.Fatalf("live after c left: %d, want 2", live)
	}
	clk.Add(11 * time.Second) // b is silent (killed)
	a.Heartbeat(ctx)
	if _, live, _ := a.State(); live != 1 {
		t.Fatalf("live after b expired: %d, want 1", live)
	}
}

// TestKeysExpire: every key a host leaves in Redis expires.
func TestKeysExpire(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a := newLimiter(t, srv, clk, "a")
	g := ask(t, a, lim, 2)
	ask(t, a, lim, 0, Release{Lease: g.Leases[0], Outcome: pacer.Success})
	ctx := context.Background()
	keys, err := a.rdb.Keys(ctx, "{t:partner.example}:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys %v %v", keys, err)
	}
	for _, k := range keys {
		if ttl := a.rdb.PTTL(ctx, k).Val(); ttl <= 0 {
			t.Errorf("key %s has no expiry (%v)", k, ttl)
		}
	}
}

// TestRedisHangs: a Redis that accepts but never answers is a timeout, and
// a timeout degrades like an error; once it answers again, so is the
// limiter shared again: at once, the only replica of the fleet being
// back.
func TestRedisHangs(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	l, err := New(Options{URL: srv.URL(), KeyPrefix: "t", Replica: "a", Now: clk.Now, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	if err := l.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Freeze()
	defer srv.Thaw()
	_, err = l.Ask(ctx, Request{Host: "partner.example", Limits: lim, Want: 1})
	if err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("ask to a hung redis: %v, want a timeout", err)
	}
	if deg, _, _ := l.State(); !deg {
		t.Fatal("not degraded after a timeout")
	}
	srv.Thaw()
	if err := l.Heartbeat(ctx); err != nil {
		t.Fatalf("heartbeat after thaw: %v", err)
	}
	if deg, _, _ := l.State(); deg {
		t.Fatal("still degraded after redis answered")
	}
}

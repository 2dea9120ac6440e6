package fleet

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
	"github.com/hookpace/hookpace/pacer"
	"github.com/redis/go-redis/v9"
)

func rawClient(t *testing.T, srv *redistest.Server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { c.Close() })
	return c
}

func askHost(t *testing.T, l *Limiter, host string, lim pacer.Limits, want int, rel ...Release) Grant {
	t.Helper()
	g, err := l.Ask(context.Background(), Request{Host: host, Limits: lim, Want: want, Releases: rel})
	if err != nil {
		t.Fatalf("ask %s: %v", host, err)
	}
	return g
}

// TestStateLostNoBurst: Redis flushed mid-burst. The replica that took
// the burst finds the host's state gone, restores its debt and its
// leases: the bucket stays empty and its attempts in flight still hold
// their slots, by their own ids (a release frees one). A host nobody
// remembers starts full. The event is logged once.
func TestStateLostNoBurst(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	var logs bytes.Buffer
	a := newLimiter(t, srv, clk, "a")
	a.log = slog.New(slog.NewTextHandler(&logs, nil))
	lim := pacer.Limits{Rate: 10, Burst: 5, Concurrency: 5}
	g := askHost(t, a, "p.example", lim, 5)
	if len(g.Leases) != 5 {
		t.Fatalf("first ask: %+v", g)
	}
	if err := rawClient(t, srv).FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	clk.Add(50 * time.Millisecond)
	got := askHost(t, a, "p.example", lim, 5)
	if len(got.Leases) != 0 || got.InFlight != 5 || got.Reason != "concurrency" {
		t.Fatalf("after the flush: %+v, want nothing granted and 5 in flight", got)
	}
	if n, _ := a.Lost(); n != 1 {
		t.Fatalf("Lost() = %d, want 1", n)
	}
	// Released by its real id: one slot; and the bucket's debt is back
	// (no token yet: one takes 101 ms at 10/s, less 1 %).
	clk.Add(40 * time.Millisecond)
	got = askHost(t, a, "p.example", lim, 5, Release{Lease: g.Leases[0], Outcome: pacer.Success, Age: 90 * time.Millisecond})
	if len(got.Leases) != 0 || got.InFlight != 4 || got.Reason != "rate" {
		t.Fatalf("after a release: %+v, want 4 in flight and the bucket empty", got)
	}
	clk.Add(got.Wait)
	if got = askHost(t, a, "p.example", lim, 5); len(got.Leases) != 1 {
		t.Fatalf("after the wait: %+v, want 1 lease", got)
	}
	if g := askHost(t, a, "new.example", lim, 5); len(g.Leases) != 5 {
		t.Fatalf("a host nobody remembers: %+v, want its full burst", g)
	}
	if c := strings.Count(logs.String(), "fleet state lost"); c != 1 {
		t.Fatalf("logged %d times, want once:\n%s", c, logs.String())
	}
}

// TestStateBackInTime: a failover to a replica that missed the last
// writes, as the host's keys put back as they were two asks ago. The
// replica whose grants were lost finds the state older than it saw and
// restores its debt and leases; the one that saw only the older state
// changes nothing.
func TestStateBackInTime(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a, b := newLimiter(t, srv, clk, "a"), newLimiter(t, srv, clk, "b")
	lim := pacer.Limits{Rate: 10, Burst: 5, Concurrency: 100}
	ctx := context.Background()
	rc := rawClient(t, srv)
	if g := askHost(t, a, "p.example", lim, 2); len(g.Leases) != 2 {
		t.Fatalf("a: %+v", g)
	}
	keys := []string{a.key("p.example", "tat"), a.key("p.example", "state"), a.key("p.example", "leases")}
	dumps := map[string]string{}
	for _, k := range keys {
		dumps[k] = rc.Dump(ctx, k).Val()
	}
	if g := askHost(t, b, "p.example", lim, 3); len(g.Leases) != 3 {
		t.Fatalf("b: %+v", g)
	}
	for k, d := range dumps {
		if err := rc.RestoreReplace(ctx, k, 0, d).Err(); err != nil {
			t.Fatal(err)
		}
	}
	clk.Add(time.Millisecond)
	if g := askHost(t, a, "p.example", lim, 1); len(g.Leases) != 1 || g.InFlight != 3 {
		t.Fatalf("a after the failover: %+v, want the older state as it is (a did not see more)", g)
	}
	if n, _ := a.Lost(); n != 0 {
		t.Fatalf("a found %d losses, want none", n)
	}
	g := askHost(t, b, "p.example", lim, 1)
	if len(g.Leases) != 0 || g.InFlight != 6 {
		t.Fatalf("b after the failover: %+v, want the bucket empty and 6 in flight", g)
	}
	if n, _ := b.Lost(); n != 1 {
		t.Fatalf("b found %d losses, want 1", n)
	}
}

// TestOutageCharged: a replica that paced alone for 2 s (Redis killed,
// then restarted empty) charges a host it was sending to with its
// share's possible sends: the bucket starts empty, not full, and fills
// at the rate. A host it never sent to starts full.
func TestOutageCharged(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a := newLimiter(t, srv, clk, "a")
	lim := pacer.Limits{Rate: 10, Burst: 5, Concurrency: 100}
	ctx := context.Background()
	g := askHost(t, a, "p.example", lim, 1)
	srv.Kill()
	if _, err := a.Ask(ctx, Request{Host: "p.example", Limits: lim, Want: 1}); err == nil {
		t.Fatal("answered with redis down")
	}
	clk.Add(2 * time.Second)
	srv.Restart()
	if err := a.Heartbeat(ctx); err != nil { // Redis answers: a, alone, is back and shared
		t.Fatal(err)
	}
	got := askHost(t, a, "p.example", lim, 5, Release{Lease: g.Leases[0], Outcome: pacer.Success})
	if len(got.Leases) != 0 || got.Reason != "rate" {
		t.Fatalf("after the outage: %+v, want an empty bucket", got)
	}
	clk.Add(got.Wait)
	if got = askHost(t, a, "p.example", lim, 5); len(got.Leases) != 1 {
		t.Fatalf("a token later: %+v, want 1", got)
	}
	clk.Add(time.Second)
	if got = askHost(t, a, "p.example", lim, 20); len(got.Leases) != 5 {
		t.Fatalf("a second later: %+v, want the bucket full again (5)", got)
	}
	if g := askHost(t, a, "new.example", lim, 5); len(g.Leases) != 5 {
		t.Fatalf("a host not sent to: %+v, want its full burst", g)
	}
}

// TestRenewAfterLoss: a renewal makes again a lease that Redis lost with
// the host's state, and does not take back one that merely expired.
func TestRenewAfterLoss(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a := newLimiter(t, srv, clk, "a")
	lim := pacer.Limits{Rate: 10, Burst: 5, Concurrency: 2}
	ctx := context.Background()
	g := askHost(t, a, "p.example", lim, 2)
	if err := rawClient(t, srv).FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.Renew(ctx, "p.example", g.Leases[:1]); err != nil {
		t.Fatal(err)
	}
	n := rawClient(t, srv).ZCard(ctx, a.key("p.example", "leases")).Val()
	if n != 1 {
		t.Fatalf("after the renewal, %d leases in redis, want 1", n)
	}
	clk.Add(11 * time.Second) // past the lease period: expired, not lost
	askHost(t, a, "p.example", lim, 0)
	if err := a.Renew(ctx, "p.example", g.Leases[:1]); err != nil {
		t.Fatal(err)
	}
	if got := askHost(t, a, "p.example", lim, 2); len(got.Leases) != 2 {
		t.Fatalf("an expired lease was taken back: %+v", got)
	}
}

// TestKeptAfterLoss: a kept lease that Redis lost with the host's state
// is made again by the ask that reports it; one kept and then given back
// in the same ask is not.
func TestKeptAfterLoss(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a := newLimiter(t, srv, clk, "a")
	lim := pacer.Limits{Rate: 1000, Burst: 100, Concurrency: 3}
	ctx := context.Background()
	g := askHost(t, a, "p.example", lim, 3)
	if err := rawClient(t, srv).FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	got := askHost(t, a, "p.example", lim, 3,
		Release{Lease: g.Leases[0], Outcome: pacer.Success, Keep: true},
		Release{Lease: g.Leases[1], Outcome: pacer.Success, Keep: true},
		Release{Lease: g.Leases[1], Outcome: pacer.NoSend})
	if len(got.Leases) != 1 || got.InFlight != 3 {
		t.Fatalf("after the flush: %+v, want 2 held (one kept, one in flight) and 1 granted", got)
	}
	ids := rawClient(t, srv).ZRange(ctx, a.key("p.example", "leases"), 0, -1).Val()
	want := []string{g.Leases[0], g.Leases[2], got.Leases[0]}
	slices.Sort(ids)
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("leases in redis %v, want %v (real ids, the stand-in replaced)", ids, want)
	}
}

// TestMarksPruned: a replica's mark goes 11 minutes after its last write
// (a fleet whose replicas come and go does not grow each host's state),
// and the replica, which expects it for 10 minutes only, finds nothing
// lost.
func TestMarksPruned(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a, b := newLimiter(t, srv, clk, "a"), newLimiter(t, srv, clk, "b")
	lim := pacer.Limits{Rate: 10, Burst: 5, Concurrency: 100}
	ctx := context.Background()
	askHost(t, a, "p.example", lim, 1)
	clk.Add(5 * time.Minute)
	askHost(t, b, "p.example", lim, 1)
	state := a.key("p.example", "state")
	if !rawClient(t, srv).HExists(ctx, state, "m:"+a.mark).Val() {
		t.Fatal("a's mark is gone after 5 minutes")
	}
	clk.Add(7 * time.Minute)
	askHost(t, b, "p.example", lim, 1)
	if rawClient(t, srv).HExists(ctx, state, "m:"+a.mark).Val() || !rawClient(t, srv).HExists(ctx, state, "m:"+b.mark).Val() {
		t.Fatalf("marks after 12 minutes: %v, want b's only", rawClient(t, srv).HKeys(ctx, state).Val())
	}
	askHost(t, a, "p.example", lim, 1)
	if n, _ := a.Lost(); n != 0 {
		t.Fatalf("a found %d losses, want none", n)
	}
}

package fleet

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
)

// tripCounter counts the fleet's round trips by operation.
type tripCounter struct {
	mu    sync.Mutex
	trips map[string]int
	errs  atomic.Int64
}

func (c *tripCounter) FleetRoundTrip(op string, _ time.Duration, err error) {
	c.mu.Lock()
	c.trips[op]++
	c.mu.Unlock()
	if err != nil {
		c.errs.Add(1)
	}
}
func (c *tripCounter) FleetFallback() {}

func (c *tripCounter) count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.trips[op]
}

// TestGatesAsksShareRoundTrips: the asks of many hosts queued while the
// asker waits for Redis go in as few round trips as the batch size allows
// (1 under way, then 199: 128 + 71), every host gets its lease, and when
// all is delivered every lease is back.
func TestGatesAsksShareRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	obs := &tripCounter{trips: map[string]int{}}
	gate := make(chan struct{})
	p := &partner{handle: func(*http.Request, int) (int, http.Header) {
		<-gate
		return 200, nil
	}}
	pol := policy(1000, 10, 2)
	a := startReplica(t, srv, "a", p, pol, replicaOpts{lease: 30 * time.Second, timeout: time.Minute, obs: obs})
	// Load the script first, so that no NOSCRIPT round trip is counted.
	if _, err := a.lim.Ask(context.Background(), Request{Host: "warm.example", Limits: pol.Limits}); err != nil {
		t.Fatal(err)
	}
	const hosts = 200
	before := obs.count("ask")
	srv.Freeze() // the first ask waits in Redis; the others queue behind it
	var wg sync.WaitGroup
	for i := range hosts {
		wg.Go(func() { a.add(t, fmt.Sprintf("h%d.example", i), 1) })
	}
	wg.Wait()
	waitFor(t, 30*time.Second, "199 asks queued", func() bool {
		a.gs.mu.Lock()
		defer a.gs.mu.Unlock()
		return len(a.gs.asks.queued) == hosts-1
	})
	srv.Thaw()
	waitFor(t, 30*time.Second, "an attempt at every host", func() bool { return len(p.arrivals("")) == hosts })
	if n := obs.count("ask") - before; n != 3 {
		t.Fatalf("%d round trips for the first asks of %d hosts, want 3 (1, %d, %d)", n, hosts, maxAskBatch, hosts-1-maxAskBatch)
	}
	close(gate)
	waitFor(t, 30*time.Second, "every webhook delivered", func() bool { return a.left() == 0 })
	a.d.Stop(context.Background())
	if n := obs.count("ask") - before; n > 2*hosts {
		t.Fatalf("%d round trips, more than one ask per host and message", n)
	}
	// Every lease came back (with the releases of the last asks, or at Stop).
	reqs := make([]Request, hosts)
	for i := range reqs {
		reqs[i] = Request{Host: fmt.Sprintf("h%d.example", i), Limits: pol.Limits}
	}
	gs, err := a.lim.AskMany(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range gs {
		if g.InFlight != 0 {
			t.Fatalf("host %d: %d leases still held after every delivery", i, g.InFlight)
		}
	}
	if obs.errs.Load() != 0 {
		t.Fatalf("%d round trips failed", obs.errs.Load())
	}
}

// TestGatesKeepLeaseForNextSend: a host with a backlog sends its next
// webhook on the lease of the attempt that just succeeded, with a token
// taken ahead, without waiting for Redis: the second webhook goes while
// Redis is frozen. Every lease is back at the end.
func TestGatesKeepLeaseForNextSend(t *testing.T) {
	srv := redistest.Start(t)
	gates := make(chan chan struct{}, 10)
	p := &partner{handle: func(*http.Request, int) (int, http.Header) {
		g := make(chan struct{})
		gates <- g
		<-g
		return 200, nil
	}}
	pol := policy(100000, 100, 1) // holds back 50 tokens: 25 may be taken ahead
	a := startReplica(t, srv, "a", p, pol, replicaOpts{lease: time.Minute, timeout: time.Minute,
		tokensFor: time.Hour}) // used whenever the attempt ends
	// Queued while paused, so that the first ask sees all three due.
	a.d.Pause("partner.example")
	a.add(t, "partner.example", 3)
	a.d.Resume("partner.example")
	first := <-gates // the first attempt, on a granted lease, with a token taken ahead
	srv.Freeze()
	close(first)
	var second chan struct{}
	select {
	case second = <-gates: // sent on the kept lease: no round trip
	case <-time.After(20 * time.Second):
		srv.Thaw()
		t.Fatal("the second webhook waited for Redis: the lease was not kept")
	}
	srv.Thaw()
	close(second)
	close(<-gates)
	waitFor(t, 30*time.Second, "3 deliveries", func() bool { return a.left() == 0 })
	if err := a.d.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if deg, _, _ := a.lim.State(); deg {
		t.Fatal("degraded: an ask timed out while Redis was frozen")
	}
	g, err := a.lim.Ask(context.Background(), Request{Host: "partner.example", Limits: pol.Limits})
	if err != nil || g.InFlight != 0 {
		t.Fatalf("after every delivery: %+v %v, want no lease held", g, err)
	}
}

// TestGatesKeptLeasesRenewed: two replicas send a long backlog to a fast
// host on kept leases for several lease periods, with attempts far shorter
// than the renewal interval: the leases stay counted (renewed with each
// report), so the two together never exceed the concurrency.
func TestGatesKeptLeasesRenewed(t *testing.T) {
	srv := redistest.Start(t)
	p := &partner{work: 2 * time.Millisecond}
	pol := policy(100000, 200, 3)
	// The lease period is short, for several periods in the run, but not so
	// short that a renewal timer a loaded 2-core machine delays lets a lease
	// lapse (300 ms did: 2 failures in about 60 runs with the CPU loaded).
	var rs []*replica
	for _, name := range []string{"a", "b"} {
		rs = append(rs, startReplica(t, srv, name, p, pol, replicaOpts{lease: 800 * time.Millisecond, tokensFor: time.Hour}))
	}
	for _, r := range rs {
		r.add(t, "partner.example", 1500)
	}
	waitFor(t, 60*time.Second, "3000 deliveries", func() bool { return rs[0].left()+rs[1].left() == 0 })
	if n := len(p.arrivals("partner.example")); n != 3000 {
		t.Fatalf("%d arrivals, want 3000", n)
	}
	if m := p.most.Load(); m > 3 {
		t.Fatalf("%d at once, cap 3: a kept lease expired while in use", m)
	}
}

// TestGatesTokensExpireUnused: a replica that never uses its tokens ahead
// in time (here: they expire at once) still delivers everything, on plain
// leases, and every lease and token is back at the end.
func TestGatesTokensExpireUnused(t *testing.T) {
	srv := redistest.Start(t)
	p := &partner{}
	pol := policy(100000, 200, 3)
	a := startReplica(t, srv, "a", p, pol, replicaOpts{lease: time.Minute, tokensFor: time.Nanosecond})
	a.add(t, "partner.example", 300)
	waitFor(t, 60*time.Second, "300 deliveries", func() bool { return a.left() == 0 })
	if err := a.d.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	g, err := a.lim.Ask(context.Background(), Request{Host: "partner.example", Limits: pol.Limits, Want: 3})
	if err != nil || g.InFlight != 3 || len(g.Leases) != 3 {
		t.Fatalf("after every delivery: %+v %v, want all 3 slots free", g, err)
	}
}

// TestGatesKeptLeasesKeepBound: two replicas sending a backlog to a fast
// host on kept leases and tokens taken ahead stay within B + R·W at the
// receiver, and under the concurrency.
func TestGatesKeptLeasesKeepBound(t *testing.T) {
	srv := redistest.Start(t)
	p := &partner{work: time.Millisecond}
	pol := policy(2000, 100, 8) // holds back 50 tokens: 12 ahead per replica of two
	var rs []*replica
	for _, name := range []string{"a", "b"} {
		r := startReplica(t, srv, name, p, pol, replicaOpts{})
		if err := r.lim.Heartbeat(context.Background()); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	for _, r := range rs {
		r.add(t, "partner.example", 1500)
	}
	waitFor(t, 60*time.Second, "3000 deliveries", func() bool { return rs[0].left()+rs[1].left() == 0 })
	got := p.arrivals("partner.example")
	if len(got) != 3000 {
		t.Fatalf("%d arrivals, want 3000", len(got))
	}
	for _, w := range []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond} {
		bound := 100 + int(2000*w.Seconds())
		if n := maxPerWindow(got, w); n > bound {
			t.Fatalf("%d arrivals in %v, bound %d", n, w, bound)
		}
	}
	if m := p.most.Load(); m > 8 {
		t.Fatalf("%d at once, cap 8", m)
	}
}

package deliver

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookpace/hookpace/fleet"
	"github.com/hookpace/hookpace/internal/redistest"
)

// These tests run in real time: the fleet's clock is Redis's, which a
// synctest bubble cannot fake. They assert bounds, never durations.

// gauge counts requests in flight at a receiver and remembers the most.
type gauge struct {
	now, most atomic.Int64
}

func (g *gauge) enter() {
	n := g.now.Add(1)
	for {
		m := g.most.Load()
		if n <= m || g.most.CompareAndSwap(m, n) {
			return
		}
	}
}
func (g *gauge) leave() { g.now.Add(-1) }

// receiver is a partner that answers 200 after work, counting in g how
// many requests it holds at once.
func (g *gauge) receiver(work time.Duration) *receiver {
	return &receiver{handle: func(*http.Request, int) (int, http.Header) {
		g.enter()
		defer g.leave()
		time.Sleep(work)
		return 200, nil
	}}
}

func fleetReplica(t *testing.T, srv *redistest.Server, name string, rc *receiver, pol Policy) (*Dispatcher, *memQueue, *fleet.Limiter) {
	t.Helper()
	return fleetReplicaLease(t, srv, name, rc, pol, 3*time.Second)
}

func fleetReplicaLease(t *testing.T, srv *redistest.Server, name string, rc *receiver, pol Policy, lease time.Duration) (*Dispatcher, *memQueue, *fleet.Limiter) {
	t.Helper()
	fl, err := fleet.New(fleet.Options{URL: srv.URL(), KeyPrefix: "t", Replica: name, Timeout: time.Second,
		LeasePeriod: lease, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	q := newMemQueue()
	d := New(Options{Queue: q, Policy: func(string) Policy { return pol }, Client: &http.Client{Transport: rc},
		Logger: slog.New(slog.DiscardHandler), Fleet: fl})
	fl.Start()
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()); fl.Close() })
	return d, q, fl
}

// waitFor polls cond until it holds or limit passes (real time).
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFleetSharesLimits: three dispatchers on one Redis send to one host
// within its rate, burst and concurrency together, each webhook once.
func TestFleetSharesLimits(t *testing.T) {
	srv := redistest.Start(t)
	var g gauge
	rc := g.receiver(20 * time.Millisecond)
	pol := policy(50, 10, 3)
	var qs []*memQueue
	for _, name := range []string{"a", "b", "c"} {
		_, q, _ := fleetReplica(t, srv, name, rc, pol)
		qs = append(qs, q)
	}
	for _, q := range qs {
		q.add("partner.example", 60)
	}
	waitFor(t, 30*time.Second, "180 deliveries", func() bool { return qs[0].left()+qs[1].left()+qs[2].left() == 0 })
	got := rc.arrivals("partner.example")
	if len(got) != 180 {
		t.Fatalf("%d arrivals, want 180 (each queue has its own paths, so count them per replica)", len(got))
	}
	if n := maxPerWindow(got, time.Second); n > 10+50 {
		t.Fatalf("%d arrivals in one second, bound 60", n)
	}
	if m := g.most.Load(); m > 3 {
		t.Fatalf("%d at once, cap 3", m)
	}
}

// TestFleetHoldAndPause: a 429 at one replica holds the host at all of
// them; a pause at one pauses all, a resume at one resumes all.
func TestFleetHoldAndPause(t *testing.T) {
	srv := redistest.Start(t)
	var mu sync.Mutex
	var first429 time.Time
	rc := &receiver{handle: func(r *http.Request, n int) (int, http.Header) {
		if n == 5 {
			mu.Lock()
			first429 = time.Now()
			mu.Unlock()
			return 429, http.Header{"Retry-After": {"1"}}
		}
		return 200, nil
	}}
	pol := policy(100, 1, 1)
	a, qa, _ := fleetReplica(t, srv, "a", rc, pol)
	b, qb, _ := fleetReplica(t, srv, "b", rc, pol)
	qa.add("partner.example", 10)
	qb.add("partner.example", 10)
	waitFor(t, 20*time.Second, "20 deliveries", func() bool { return qa.left()+qb.left() == 0 })
	mu.Lock()
	held := first429
	mu.Unlock()
	for _, ar := range rc.arrivals("partner.example") {
		if ar.at.After(held) && ar.at.Before(held.Add(time.Second)) {
			t.Fatalf("arrival %v after the 429 at %v, within its Retry-After of 1 s", ar.at.Sub(held), held)
		}
	}

	// Paused at a, b (with work) sees it at its next ask and sends nothing.
	a.Pause("partner.example")
	before := len(rc.arrivals(""))
	qa.add("partner.example", 3)
	qb.add("partner.example", 3)
	waitFor(t, 5*time.Second, "b to see the pause", func() bool {
		st, _ := b.Host("partner.example")
		return st.Paused
	})
	if n := len(rc.arrivals("")) - before; n != 0 {
		t.Fatalf("%d deliveries while paused", n)
	}
	// Resumed at b, a (with work) sees it at its next ask.
	b.Resume("partner.example")
	waitFor(t, 10*time.Second, "6 more deliveries", func() bool { return qa.left()+qb.left() == 0 })
	if st, _ := a.Host("partner.example"); st.Paused {
		t.Fatalf("a still paused: %+v", st)
	}
}

// TestFleetRedisDown: with Redis killed, each replica sends on its share
// (concurrency 4 over 2 replicas: 2 each, 4 together), nothing is lost,
// and after a restart the replicas share Redis again.
func TestFleetRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	var g gauge
	rc := g.receiver(10 * time.Millisecond)
	pol := policy(100, 10, 4)
	a, qa, fa := fleetReplica(t, srv, "a", rc, pol)
	_, qb, fb := fleetReplica(t, srv, "b", rc, pol)
	fa.Heartbeat(context.Background()) // both know there are 2
	srv.Kill()
	qa.add("partner.example", 50)
	qb.add("partner.example", 50)
	waitFor(t, 20*time.Second, "100 deliveries with redis down", func() bool { return qa.left()+qb.left() == 0 })
	for _, f := range []*fleet.Limiter{fa, fb} {
		if deg, live, _ := f.State(); !deg || live != 2 {
			t.Fatalf("%s: degraded %v live %d, want degraded with 2", f.Replica(), deg, live)
		}
	}
	if st := a.Fleet(); st.State != "degraded: local share 1/2" {
		t.Fatalf("fleet state %q", st.State)
	}
	if st, _ := a.Host("partner.example"); st.Fleet != "degraded: local share 1/2" || st.Concurrency != 4 {
		t.Fatalf("host status %+v", st)
	}
	if m := g.most.Load(); m > 4 {
		t.Fatalf("%d at once with redis down, cap 4 (2 + 2)", m)
	}
	if n := maxPerWindow(rc.arrivals(""), time.Second); n > 10+100 {
		t.Fatalf("%d in one second with redis down, bound 110", n)
	}
	srv.Restart()
	waitFor(t, 10*time.Second, "shared again", func() bool {
		d1, _, _ := fa.State()
		d2, _, _ := fb.State()
		return !d1 && !d2
	})
	qa.add("partner.example", 20)
	waitFor(t, 10*time.Second, "20 more", func() bool { return qa.left() == 0 })
	if st, _ := a.Host("partner.example"); st.Fleet != "shared" || st.FleetInFlight == nil {
		t.Fatalf("host status after restart %+v", st)
	}
	if n := len(rc.arrivals("")); n != 120 {
		t.Fatalf("%d deliveries, want 120", n)
	}
}

// TestFleetStopGivesLeasesBack: attempts that finish while the dispatcher
// stops give their leases back at once; the other replicas need not wait
// a lease period for them to expire.
func TestFleetStopGivesLeasesBack(t *testing.T) {
	srv := redistest.Start(t)
	gate := make(chan struct{})
	rc := &receiver{handle: func(r *http.Request, n int) (int, http.Header) {
		<-gate
		return 200, nil
	}}
	pol := policy(1000, 10, 2)
	a, qa, _ := fleetReplica(t, srv, "a", rc, pol)
	qa.add("partner.example", 2)
	waitFor(t, 10*time.Second, "2 in flight", func() bool { return len(rc.arrivals("")) == 2 })
	stopped := make(chan error)
	go func() { stopped <- a.Stop(context.Background()) }()
	waitFor(t, 10*time.Second, "stopping", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.stopping
	})
	close(gate)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	probe, err := fleet.New(fleet.Options{URL: srv.URL(), KeyPrefix: "t", Replica: "probe"})
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	g, err := probe.Ask(context.Background(), fleet.Request{Host: "partner.example", Limits: pol.Limits, Want: 2})
	if err != nil || len(g.Leases) != 2 {
		t.Fatalf("after a stopped: %+v %v, want both slots", g, err)
	}
}

// TestFleetRenewsLongAttempts: an attempt that outlasts the lease period
// keeps its lease by renewing it, so another replica never takes the slot
// while the first attempt still runs.
func TestFleetRenewsLongAttempts(t *testing.T) {
	srv := redistest.Start(t)
	var g gauge
	rc := g.receiver(1200 * time.Millisecond) // the partner's own work: four lease periods
	pol := policy(50, 10, 1)
	var qs []*memQueue
	for _, name := range []string{"a", "b"} {
		_, q, _ := fleetReplicaLease(t, srv, name, rc, pol, 300*time.Millisecond)
		qs = append(qs, q)
	}
	for _, q := range qs {
		q.add("partner.example", 2)
	}
	waitFor(t, 30*time.Second, "4 deliveries", func() bool { return qs[0].left()+qs[1].left() == 0 })
	if m := g.most.Load(); m > 1 {
		t.Fatalf("%d at once, cap 1: a lease expired under a running attempt", m)
	}
}

package fleet

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
)

// TestGatesShareLimits: three replicas on one Redis send to one host
// within its rate, burst and concurrency together, each webhook once.
func TestGatesShareLimits(t *testing.T) {
	srv := redistest.Start(t)
	p := &partner{work: 20 * time.Millisecond}
	pol := policy(50, 10, 3)
	var rs []*replica
	for _, name := range []string{"a", "b", "c"} {
		rs = append(rs, startReplica(t, srv, name, p, pol, replicaOpts{}))
	}
	for _, r := range rs {
		r.add(t, "partner.example", 60)
	}
	waitFor(t, 30*time.Second, "180 deliveries", func() bool { return rs[0].left()+rs[1].left()+rs[2].left() == 0 })
	got := p.arrivals("partner.example")
	if len(got) != 180 {
		t.Fatalf("%d arrivals, want 180", len(got))
	}
	if n := maxPerWindow(got, time.Second); n > 10+50 {
		t.Fatalf("%d arrivals in one second, bound 60", n)
	}
	if m := p.most.Load(); m > 3 {
		t.Fatalf("%d at once, cap 3", m)
	}
}

// TestGatesHoldAndPause: a 429 at one replica holds the host at all of
// them; a pause at one pauses all, a resume at one resumes all.
func TestGatesHoldAndPause(t *testing.T) {
	srv := redistest.Start(t)
	var mu sync.Mutex
	var first429 time.Time
	p := &partner{handle: func(r *http.Request, n int) (int, http.Header) {
		if n == 5 {
			mu.Lock()
			first429 = time.Now()
			mu.Unlock()
			return 429, http.Header{"Retry-After": {"1"}}
		}
		return 200, nil
	}}
	pol := policy(100, 1, 1)
	a := startReplica(t, srv, "a", p, pol, replicaOpts{})
	b := startReplica(t, srv, "b", p, pol, replicaOpts{})
	a.add(t, "partner.example", 10)
	b.add(t, "partner.example", 10)
	waitFor(t, 20*time.Second, "20 deliveries", func() bool { return a.left()+b.left() == 0 })
	mu.Lock()
	held := first429
	mu.Unlock()
	for _, ar := range p.arrivals("partner.example") {
		if ar.at.After(held) && ar.at.Before(held.Add(time.Second)) {
			t.Fatalf("arrival %v after the 429 at %v, within its Retry-After of 1 s", ar.at.Sub(held), held)
		}
	}

	// Paused at a, b (with work) sees it at its next ask and sends nothing.
	a.d.Pause("partner.example")
	before := len(p.arrivals(""))
	a.add(t, "partner.example", 3)
	b.add(t, "partner.example", 3)
	waitFor(t, 5*time.Second, "b to see the pause", func() bool {
		st, _ := b.d.Host("partner.example")
		return st.Paused
	})
	if n := len(p.arrivals("")) - before; n != 0 {
		t.Fatalf("%d deliveries while paused", n)
	}
	// Resumed at b, a (with work) sees it at its next sync.
	b.d.Resume("partner.example")
	waitFor(t, 10*time.Second, "6 more deliveries", func() bool { return a.left()+b.left() == 0 })
	if st, _ := a.d.Host("partner.example"); st.Paused {
		t.Fatalf("a still paused: %+v", st)
	}
}

// TestGatesRedisDown: with Redis killed, each replica sends on its share
// (concurrency 4 over 2 replicas: 2 each, 4 together), nothing is lost,
// and after a restart the replicas share Redis again.
func TestGatesRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	p := &partner{work: 10 * time.Millisecond}
	pol := policy(100, 10, 4)
	a := startReplica(t, srv, "a", p, pol, replicaOpts{})
	b := startReplica(t, srv, "b", p, pol, replicaOpts{})
	a.lim.Heartbeat(context.Background()) // both know there are 2
	srv.Kill()
	a.add(t, "partner.example", 50)
	b.add(t, "partner.example", 50)
	waitFor(t, 20*time.Second, "100 deliveries with redis down", func() bool { return a.left()+b.left() == 0 })
	for _, r := range []*replica{a, b} {
		if deg, live, _ := r.lim.State(); !deg || live != 2 {
			t.Fatalf("%s: degraded %v live %d, want degraded with 2", r.lim.Replica(), deg, live)
		}
	}
	if st := a.d.Fleet(); st.State != "degraded: local share 1/2" {
		t.Fatalf("fleet state %q", st.State)
	}
	if st, _ := a.d.Host("partner.example"); st.Fleet != "degraded: local share 1/2" || st.Concurrency != 4 {
		t.Fatalf("host status %+v", st)
	}
	if m := p.most.Load(); m > 4 {
		t.Fatalf("%d at once with redis down, cap 4 (2 + 2)", m)
	}
	if n := maxPerWindow(p.arrivals(""), time.Second); n > 10+100 {
		t.Fatalf("%d in one second with redis down, bound 110", n)
	}
	srv.Restart()
	waitFor(t, 10*time.Second, "shared again", func() bool {
		d1, _, _ := a.lim.State()
		d2, _, _ := b.lim.State()
		return !d1 && !d2
	})
	a.add(t, "partner.example", 20)
	waitFor(t, 10*time.Second, "20 more", func() bool { return a.left() == 0 })
	if st, _ := a.d.Host("partner.example"); st.Fleet != "shared" || st.FleetInFlight == nil {
		t.Fatalf("host status after restart %+v", st)
	}
	if n := len(p.arrivals("")); n != 120 {
		t.Fatalf("%d deliveries, want 120", n)
	}
}

// TestGatesStopGiveLeasesBack: attempts that finish while the dispatcher
// stops give their leases back at Stop; the other replicas need not wait
// a lease period for them to expire.
func TestGatesStopGiveLeasesBack(t *testing.T) {
	srv := redistest.Start(t)
	gate := make(chan struct{})
	p := &partner{handle: func(*http.Request, int) (int, http.Header) {
		<-gate
		return 200, nil
	}}
	pol := policy(1000, 10, 2)
	a := startReplica(t, srv, "a", p, pol, replicaOpts{})
	a.add(t, "partner.example", 2)
	waitFor(t, 10*time.Second, "2 in flight", func() bool { return len(p.arrivals("")) == 2 })
	stopped := make(chan error)
	go func() { stopped <- a.d.Stop(context.Background()) }()
	close(gate)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	probe, err := New(Options{URL: srv.URL(), KeyPrefix: "t", Replica: "probe"})
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	g, err := probe.Ask(context.Background(), Request{Host: "partner.example", Limits: pol.Limits, Want: 2})
	if err != nil || len(g.Leases) != 2 {
		t.Fatalf("after a stopped: %+v %v, want both slots", g, err)
	}
}

// TestGatesRenewLongAttempts: an attempt that outlasts the lease period
// keeps its lease by renewing it, so another replica never takes the slot
// while the first attempt still runs.
func TestGatesRenewLongAttempts(t *testing.T) {
	srv := redistest.Start(t)
	p := &partner{work: 1200 * time.Millisecond} // four lease periods
	pol := policy(50, 10, 1)
	var rs []*replica
	for _, name := range []string{"a", "b"} {
		rs = append(rs, startReplica(t, srv, name, p, pol, replicaOpts{lease: 300 * time.Millisecond}))
	}
	for _, r := range rs {
		r.add(t, "partner.example", 2)
	}
	waitFor(t, 30*time.Second, "4 deliveries", func() bool { return rs[0].left()+rs[1].left() == 0 })
	if m := p.most.Load(); m > 1 {
		t.Fatalf("%d at once, cap 1: a lease expired under a running attempt", m)
	}
}

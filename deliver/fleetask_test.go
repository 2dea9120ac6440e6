package deliver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookpace/hookpace/fleet"
	"github.com/hookpace/hookpace/internal/redistest"
	"github.com/hookpace/hookpace/spool"
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

// TestFleetAsksShareRoundTrips: the asks of many hosts queued while the
// asker waits go to Redis in as few round trips as the batch size allows
// (200 hosts: 128 + 72), every host gets its lease, and when all is
// delivered every lease is back.
func TestFleetAsksShareRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	obs := &tripCounter{trips: map[string]int{}}
	fl, err := fleet.New(fleet.Options{URL: srv.URL(), KeyPrefix: "t", Replica: "a", Timeout: 5 * time.Second,
		LeasePeriod: 30 * time.Second, Logger: slog.New(slog.DiscardHandler), Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	pol := policy(1000, 10, 2)
	// Load the script first, so that no NOSCRIPT round trip is counted.
	if _, err := fl.Ask(context.Background(), fleet.Request{Host: "warm.example", Limits: pol.Limits}); err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	rc := &receiver{handle: func(*http.Request, int) (int, http.Header) {
		<-gate
		return 200, nil
	}}
	q := newMemQueue()
	d := New(Options{Queue: q, Policy: func(string) Policy { return pol }, Client: &http.Client{Transport: rc},
		Logger: slog.New(slog.DiscardHandler), Fleet: fl})
	fl.Start()
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()); fl.Close() })

	// Queue one webhook for each of 200 hosts, holding the dispatcher's
	// lock throughout: the asker, started by the first host's ask, can take
	// the queue only once all 200 asks are in it.
	const hosts = 200
	q.Notify(nil)
	var msgs []*spool.Message
	for i := range hosts {
		name := fmt.Sprintf("h%d.example", i)
		q.add(name, 1)
		m, _ := q.Read(name, 0, 1)
		msgs = append(msgs, m...)
	}
	before := obs.count("ask")
	d.mu.Lock()
	d.enqueueLocked(msgs)
	queued := len(d.asks.queued)
	d.mu.Unlock()
	if queued != hosts {
		t.Fatalf("%d asks queued, want %d", queued, hosts)
	}
	waitFor(t, 30*time.Second, "an attempt at every host", func() bool { return len(rc.arrivals("")) == hosts })
	if n := obs.count("ask") - before; n != 2 {
		t.Fatalf("%d round trips for the first asks of %d hosts, want 2 (%d + %d)", n, hosts, maxAskBatch, hosts-maxAskBatch)
	}
	close(gate)
	waitFor(t, 30*time.Second, "every webhook delivered", func() bool { return q.left() == 0 })
	d.Stop(context.Background())
	if n := obs.count("ask") - before; n > 2*hosts {
		t.Fatalf("%d round trips, more than one ask per host and message", n)
	}
	// Every lease came back (with the releases of the last asks, or at Stop).
	reqs := make([]fleet.Request, hosts)
	for i := range reqs {
		reqs[i] = fleet.Request{Host: fmt.Sprintf("h%d.example", i), Limits: pol.Limits}
	}
	gs, err := fl.AskMany(context.Background(), reqs)
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

// TestFleetKeepsLeaseForNextSend: a host with a backlog sends its next
// webhook on the lease of the attempt that just succeeded, with a token
// taken ahead, without waiting for Redis: the second webhook goes while
// Redis is frozen. Every lease is back at the end.
func TestFleetKeepsLeaseForNextSend(t *testing.T) {
	srv := redistest.Start(t)
	fl, err := fleet.New(fleet.Options{URL: srv.URL(), KeyPrefix: "t", Replica: "a", Timeout: time.Minute,
		LeasePeriod: time.Minute, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	gates := make(chan chan struct{}, 10)
	rc := &receiver{handle: func(*http.Request, int) (int, http.Header) {
		g := make(chan struct{})
		gates <- g
		<-g
		return 200, nil
	}}
	pol := policy(100000, 100, 1) // holds back 50 tokens: 25 may be taken ahead
	q := newMemQueue()
	d := New(Options{Queue: q, Policy: func(string) Policy { return pol }, Client: &http.Client{Transport: rc},
		Logger: slog.New(slog.DiscardHandler), Fleet: fl})
	d.asks.tokensFor = time.Hour // used whenever the attempt ends
	fl.Start()
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()); fl.Close() })
	q.add("partner.example", 3)
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
	waitFor(t, 30*time.Second, "3 deliveries", func() bool { return q.left() == 0 })
	if err := d.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if deg, _, _ := fl.State(); deg {
		t.Fatal("degraded: an ask timed out while Redis was frozen")
	}
	g, err := fl.Ask(context.Background(), fleet.Request{Host: "partner.example", Limits: pol.Limits})
	if err != nil || g.InFlight != 0 {
		t.Fatalf("after every delivery: %+v %v, want no lease held", g, err)
	}
}

// TestFleetKeptLeasesRenewed: two replicas send a long backlog to a fast
// host on kept leases for several lease periods, with attempts far shorter
// than the renewal interval: the leases stay counted (renewed with each
// report), so the two together never exceed the concurrency.
func TestFleetKeptLeasesRenewed(t *testing.T) {
	srv := redistest.Start(t)
	var g gauge
	rc := g.receiver(2 * time.Millisecond) // the partner's own work
	pol := policy(100000, 200, 3)
	var qs []*memQueue
	// The lease period is short, for several periods in the run, but not so
	// short that a renewal timer a loaded 2-core machine delays lets a lease
	// lapse (300 ms did: 2 failures in about 60 runs with the CPU loaded).
	for _, name := range []string{"a", "b"} {
		d, q, _ := fleetReplicaLease(t, srv, name, rc, pol, 800*time.Millisecond)
		d.mu.Lock()
		d.asks.tokensFor = time.Hour
		d.mu.Unlock()
		qs = append(qs, q)
	}
	for _, q := range qs {
		q.add("partner.example", 1500)
	}
	waitFor(t, 60*time.Second, "3000 deliveries", func() bool { return qs[0].left()+qs[1].left() == 0 })
	if n := len(rc.arrivals("partner.example")); n != 3000 {
		t.Fatalf("%d arrivals, want 3000", n)
	}
	if m := g.most.Load(); m > 3 {
		t.Fatalf("%d at once, cap 3: a kept lease expired while in use", m)
	}
}

// TestFleetTokensExpireUnused: a replica that never uses its tokens ahead
// in time (here: they expire at once) still delivers everything, on plain
// leases, and every lease and token is back at the end.
func TestFleetTokensExpireUnused(t *testing.T) {
	srv := redistest.Start(t)
	rc := &receiver{}
	pol := policy(100000, 200, 3)
	d, q, fl := fleetReplicaLease(t, srv, "a", rc, pol, time.Minute)
	d.mu.Lock()
	d.asks.tokensFor = time.Nanosecond
	d.mu.Unlock()
	q.add("partner.example", 300)
	waitFor(t, 60*time.Second, "300 deliveries", func() bool { return q.left() == 0 })
	if err := d.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	g, err := fl.Ask(context.Background(), fleet.Request{Host: "partner.example", Limits: pol.Limits, Want: 3})
	if err != nil || g.InFlight != 3 || len(g.Leases) != 3 {
		t.Fatalf("after every delivery: %+v %v, want all 3 slots free", g, err)
	}
}

// TestFleetKeptLeasesKeepBound: two replicas sending a backlog to a fast
// host on kept leases and tokens taken ahead stay within B + R·W at the
// receiver, and under the concurrency.
func TestFleetKeptLeasesKeepBound(t *testing.T) {
	srv := redistest.Start(t)
	var g gauge
	rc := g.receiver(time.Millisecond) // the partner's own work
	pol := policy(2000, 100, 8)        // holds back 50 tokens: 12 ahead per replica of two
	var qs []*memQueue
	for _, name := range []string{"a", "b"} {
		_, q, fl := fleetReplica(t, srv, name, rc, pol)
		if err := fl.Heartbeat(context.Background()); err != nil {
			t.Fatal(err)
		}
		qs = append(qs, q)
	}
	for _, q := range qs {
		q.add("partner.example", 1500)
	}
	waitFor(t, 60*time.Second, "3000 deliveries", func() bool { return qs[0].left()+qs[1].left() == 0 })
	got := rc.arrivals("partner.example")
	if len(got) != 3000 {
		t.Fatalf("%d arrivals, want 3000", len(got))
	}
	for _, w := range []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond} {
		bound := 100 + int(2000*w.Seconds())
		if n := maxPerWindow(got, w); n > bound {
			t.Fatalf("%d arrivals in %v, bound %d", n, w, bound)
		}
	}
	if m := g.most.Load(); m > 8 {
		t.Fatalf("%d at once, cap 8", m)
	}
}

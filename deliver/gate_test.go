package deliver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookpace/hookpace/pacer"
)

// asyncGates are gates that decide elsewhere, as the fleet's do: a host
// sends only on a lease the test grants, and a grant arrives on the
// gates' own goroutine, through wake. They keep a pacer.Host for a host's
// local state (pause, in flight, breaker), as the fleet's gates do, and
// record every call the scheduler makes. Like the fleet's, they ask the
// host's Backlog from inside Pumped and Release, with their lock held,
// and fail the test if a Gate method is entered again meanwhile (a
// Backlog method that calls the Gate would deadlock the fleet's).
type asyncGates struct {
	t      *testing.T
	wake   func(apply func() []string)
	paused func(host string, paused bool)

	mu       sync.Mutex
	gates    map[string]*asyncGate
	asked    map[string]int // Acquire calls that found no lease
	released []string       // leases given back by Release, in order
	unused   []string       // granted leases Pumped gave back unused
	told     []string       // Tell calls: "pause host" or "resume host"
	tellOK   bool
	stopped  bool
	stopSeen int // attempts in flight when Stop was called (all hosts)
	// emptyAsked counts Pumped calls that found the host's backlog empty.
	emptyAsked int
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

type asyncGate struct {
	*pacer.Host
	gs     *asyncGates
	b      Backlog
	inCall bool // a Gate method is running (the dispatcher's lock serializes them)
	name   string
	leases []string
	next   int
	closed bool
}

var (
	_ Gates = (*asyncGates)(nil)
	_ Gate  = (*asyncGate)(nil)
)

func newAsyncGates(t *testing.T) *asyncGates {
	return &asyncGates{t: t, gates: map[string]*asyncGate{}, asked: map[string]int{}, tellOK: true}
}

// enter marks a Gate call of g as running; the returned func ends it. A
// call made while another runs is a re-entry from the Backlog.
func (g *asyncGate) enter(what string) func() {
	if g.inCall {
		g.gs.t.Errorf("%s: gate of %s entered again from inside a gate call", what, g.name)
		return func() {}
	}
	g.inCall = true
	return func() { g.inCall = false }
}

func (gs *asyncGates) Bind(wake func(apply func() []string), paused func(string, bool)) {
	gs.wake, gs.paused = wake, paused
}

func (gs *asyncGates) Gate(host string, l pacer.Limits, now time.Time, b Backlog) Gate {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := &asyncGate{Host: pacer.New(l, now), gs: gs, b: b, name: host}
	gs.gates[host] = g
	return g
}

func (gs *asyncGates) Tell(host string, paused bool) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	what := "resume "
	if paused {
		what = "pause "
	}
	gs.told = append(gs.told, what+host)
	return gs.tellOK
}

func (gs *asyncGates) Status() *FleetStatus {
	return &FleetStatus{Replica: "fake", Live: 1, State: "shared"}
}

func (gs *asyncGates) Stop() {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.stopped = true
	for _, g := range gs.gates {
		gs.stopSeen += g.InFlight()
	}
}

// grant gives host n leases, as an answer from elsewhere would: on
// another goroutine, applied under the dispatcher's lock.
func (gs *asyncGates) grant(host string, n int) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		gs.wake(func() []string {
			gs.mu.Lock()
			defer gs.mu.Unlock()
			g := gs.gates[host]
			for range n {
				g.next++
				g.leases = append(g.leases, fmt.Sprintf("%s:%d", host, g.next))
			}
			return []string{host}
		})
	}()
	<-done
}

func (gs *asyncGates) count(m map[string]int, host string) int {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return m[host]
}

func (g *asyncGate) Acquire(now time.Time) (bool, time.Time, string) {
	defer g.enter("Acquire")()
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	if g.Paused() {
		return false, time.Time{}, ""
	}
	if len(g.leases) == 0 {
		g.gs.asked[g.name]++
		return false, time.Time{}, "" // a grant wakes the host
	}
	if ok, wake := g.Take(now); !ok {
		return false, wake, ""
	}
	lease := g.leases[0]
	g.leases = g.leases[1:]
	return true, time.Time{}, lease
}

func (g *asyncGate) Release(now time.Time, lease string, r pacer.Result) pacer.Hold {
	defer g.enter("Release")()
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	g.gs.released = append(g.gs.released, lease)
	g.b.Due(now) // the fleet's gate asks, to decide whether to keep a lease
	return g.Host.Release(now, r)
}

// Pumped gives back the leases the pump left unused, as the fleet's do,
// and asks the host whether it has more to send, as the fleet's do to
// decide whether to ask for more.
func (g *asyncGate) Pumped(now time.Time) {
	defer g.enter("Pumped")()
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	g.gs.emptyAsked += boolInt(g.b.Empty(now))
	g.gs.unused = append(g.gs.unused, g.leases...)
	g.leases = nil
}

func (g *asyncGate) InFlight() int {
	defer g.enter("InFlight")()
	return g.Host.InFlight()
}

func (g *asyncGate) Status(_ time.Time, hs *HostStatus) { hs.Fleet = "shared" }

func (g *asyncGate) Close() {
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	g.closed = true
}

func startAsync(t *testing.T, q *memQueue, rc *receiver) (*Dispatcher, *asyncGates) {
	t.Helper()
	return startAsyncWith(t, q, rc, policy(1000, 100, 8), 0)
}

func startAsyncWith(t *testing.T, q *memQueue, rc *receiver, pol Policy, maxBuffered int64) (*Dispatcher, *asyncGates) {
	t.Helper()
	gs := newAsyncGates(t)
	d := New(Options{Reader: q, Store: q, Stats: q, Journal: q, Policy: fixed(pol),
		Client: &http.Client{Transport: rc}, Logger: slog.New(slog.DiscardHandler), Gates: gs,
		MaxBuffered: maxBuffered})
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()) })
	return d, gs
}

// The scheduler sends only on leases its gate grants, uses a grant that
// arrives on another goroutine at once (it is never given back while work
// is due), gives every lease back once, and waits for a grant without a
// timer of its own.
func TestSchedulerOnAsyncGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		q := newMemQueue()
		_, gs := startAsync(t, q, rc)
		q.add("partner.example", 5)
		synctest.Wait()
		if n := len(rc.arrivals("")); n != 0 || gs.count(gs.asked, "partner.example") == 0 {
			t.Fatalf("%d sent without a lease, %d asks", n, gs.count(gs.asked, "partner.example"))
		}
		time.Sleep(time.Hour) // nothing wakes the host but a grant
		synctest.Wait()
		if n := len(rc.arrivals("")); n != 0 {
			t.Fatalf("%d sent without a lease after an hour", n)
		}
		gs.grant("partner.example", 2)
		synctest.Wait()
		if n := len(rc.arrivals("")); n != 2 {
			t.Fatalf("%d sent on 2 leases", n)
		}
		gs.grant("partner.example", 3)
		synctest.Wait()
		if q.left() != 0 {
			t.Fatalf("%d left after 5 leases for 5 webhooks", q.left())
		}
		gs.mu.Lock()
		defer gs.mu.Unlock()
		if len(gs.unused) != 0 {
			t.Errorf("granted leases given back unused while work was due: %v", gs.unused)
		}
		released := slices.Clone(gs.released)
		slices.Sort(released)
		want := []string{"partner.example:1", "partner.example:2", "partner.example:3", "partner.example:4", "partner.example:5"}
		if !slices.Equal(released, want) {
			t.Errorf("released %v, want each lease once: %v", released, want)
		}
	})
}

// A pause or resume the gates learn from elsewhere goes through the one
// writer path: recorded durably and applied to the gate, without being
// told back to the gates; an operator's is told to them.
func TestAsyncGatePauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		q := newMemQueue()
		d, gs := startAsync(t, q, rc)
		q.add("partner.example", 1)
		synctest.Wait()
		gs.paused("partner.example", true)
		synctest.Wait()
		if p, _ := q.Paused(); !slices.Equal(p, []string{"partner.example"}) {
			t.Fatalf("recorded paused %v", p)
		}
		gs.grant("partner.example", 1)
		synctest.Wait()
		if st, _ := d.Host("partner.example"); !st.Paused || len(rc.arrivals("")) != 0 {
			t.Fatalf("paused %v, %d sent while paused", st.Paused, len(rc.arrivals("")))
		}
		gs.paused("partner.example", false)
		synctest.Wait()
		gs.grant("partner.example", 1)
		synctest.Wait()
		if p, _ := q.Paused(); len(p) != 0 || q.left() != 0 {
			t.Fatalf("after the resume: recorded %v, %d left", p, q.left())
		}
		if err := d.Pause("other.example"); err != nil {
			t.Fatal(err)
		}
		gs.mu.Lock()
		gs.tellOK = false
		gs.mu.Unlock()
		if ok, _ := d.Resume("never.example"); ok {
			t.Error("a host nobody knows paused reported resumed though the gates could not be told")
		}
		gs.mu.Lock()
		defer gs.mu.Unlock()
		want := []string{"pause other.example", "resume never.example"}
		if !slices.Equal(gs.told, want) {
			t.Errorf("told %v, want only the operator's changes: %v", gs.told, want)
		}
	})
}

// Stop stops the gates once the last attempt has ended, so that what
// they give back includes every lease.
func TestAsyncGatesStopAfterLastAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		rc := &receiver{handle: func(*http.Request, int) (int, http.Header) {
			<-release
			return 200, nil
		}}
		q := newMemQueue()
		d, gs := startAsync(t, q, rc)
		q.add("partner.example", 2)
		synctest.Wait()
		gs.grant("partner.example", 2)
		synctest.Wait()
		stopped := make(chan error)
		go func() { stopped <- d.Stop(context.Background()) }()
		synctest.Wait()
		gs.mu.Lock()
		early := gs.stopped
		gs.mu.Unlock()
		if early {
			t.Fatal("gates stopped with attempts in flight")
		}
		close(release)
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
		gs.mu.Lock()
		defer gs.mu.Unlock()
		if !gs.stopped || gs.stopSeen != 0 {
			t.Fatalf("stopped %v with %d in flight", gs.stopped, gs.stopSeen)
		}
	})
}

// A batching host on gates that ask its backlog from inside their calls,
// as the fleet's do, with more queued than fits in memory: gathering a
// batch never asks the gate (which would wait on itself), and every
// webhook, each to its own URL, is delivered.
func TestAsyncGateBatchingDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		q := newMemQueue()
		pol := batchPolicy(50, 1<<20, 200*time.Millisecond)
		pol.Limits = policy(1000, 100, 8).Limits
		_, gs := startAsyncWith(t, q, rc, pol, 16<<10)
		const n = 1000
		q.put(jsonHooks("b.example", n, func(i int) string { return fmt.Sprint("/hooks/", i) })...)
		for range 4 * n {
			synctest.Wait()
			if q.left() == 0 {
				break
			}
			gs.grant("b.example", 8)
			time.Sleep(50 * time.Millisecond)
		}
		synctest.Wait()
		if left := q.left(); left != 0 {
			t.Fatalf("%d of %d webhooks left", left, n)
		}
		if got := len(rc.arrivals("")); got != n {
			t.Errorf("%d requests for %d webhooks to distinct URLs, want one each", got, n)
		}
	})
}

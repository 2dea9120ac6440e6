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
// record every call the scheduler makes.
type asyncGates struct {
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
}

type asyncGate struct {
	*pacer.Host
	gs     *asyncGates
	name   string
	leases []string
	next   int
	closed bool
}

var (
	_ Gates = (*asyncGates)(nil)
	_ Gate  = (*asyncGate)(nil)
)

func newAsyncGates() *asyncGates {
	return &asyncGates{gates: map[string]*asyncGate{}, asked: map[string]int{}, tellOK: true}
}

func (gs *asyncGates) Bind(wake func(apply func() []string), paused func(string, bool)) {
	gs.wake, gs.paused = wake, paused
}

func (gs *asyncGates) Gate(host string, l pacer.Limits, now time.Time, _ Backlog) Gate {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := &asyncGate{Host: pacer.New(l, now), gs: gs, name: host}
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
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	g.gs.released = append(g.gs.released, lease)
	return g.Host.Release(now, r)
}

// Pumped gives back the leases the pump left unused, as the fleet's do.
func (g *asyncGate) Pumped(time.Time) {
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	g.gs.unused = append(g.gs.unused, g.leases...)
	g.leases = nil
}

func (g *asyncGate) Status(_ time.Time, hs *HostStatus) { hs.Fleet = "shared" }

func (g *asyncGate) Close() {
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	g.closed = true
}

func startAsync(t *testing.T, q *memQueue, rc *receiver) (*Dispatcher, *asyncGates) {
	t.Helper()
	gs := newAsyncGates()
	d := New(Options{Reader: q, Store: q, Stats: q, Journal: q, Policy: fixed(policy(1000, 100, 8)),
		Client: &http.Client{Transport: rc}, Logger: slog.New(slog.DiscardHandler), Gates: gs})
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

package window

import (
	"fmt"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// drain hands out and delivers everything f's host has, reads included.
func (f *fixture) drain(now time.Time) int {
	n := 0
	for step := 0; ; step++ {
		if step > 10_000 {
			f.t.Fatal("the host never drained")
		}
		m := f.next(now)
		if m == nil {
			f.upkeep(now)
			if m = f.next(now); m == nil {
				f.upkeep(now) // the upkeep of the pump after the last delivery
				return n
			}
		}
		f.done(m)
		n++
	}
}

// TestPlainHostCarriesNoLaneMaps: a host whose webhooks carry no key,
// priority or ordering key holds its default lane alone, without the
// maps of lanes, keys and webhooks out, or the rare part (ordering keys,
// delays, the bound); its first keyed webhook and its first ordered one
// make them, and once it has delivered everything it gives them back.
func TestPlainHostCarriesNoLaneMaps(t *testing.T) {
	f := newFixture(t, Policy{Window: 32, MaxLanes: 64}, 1<<20)
	maps := func() (lanes, units, rare bool) {
		ls := &f.w.lanes
		return ls.lanes != nil || ls.outs != nil, ls.units != nil, ls.rare != nil
	}
	now := f.clock
	for range 20 {
		f.add(nil)
	}
	if n := f.drain(now); n != 20 {
		t.Fatalf("%d delivered, want 20", n)
	}
	if l, u, o := maps(); l || u || o {
		t.Fatalf("a plain host made lane maps: lanes %v, keys %v, rare part %v", l, u, o)
	}
	for i := range 3 {
		f.add(func(m *spool.Message) { m.Fairness = fmt.Sprint("tenant-", i) })
	}
	if l, u, _ := maps(); !l || !u {
		t.Fatalf("keyed webhooks made no lane maps: lanes %v, keys %v", l, u)
	}
	for range 3 {
		f.add(func(m *spool.Message) { m.Ordering = "order-1" })
	}
	if _, _, o := maps(); !o {
		t.Fatal("ordered webhooks made no map of ordering keys")
	}
	if n := f.drain(now); n != 6 {
		t.Fatalf("%d delivered, want 6", n)
	}
	if l, u, o := maps(); l || u || o {
		t.Fatalf("an emptied host kept its lane maps: lanes %v, keys %v, rare part %v", l, u, o)
	}
	if f.w.ready.buf != nil || f.w.lanes.def.q.buf != nil || f.w.lanes.ring.buf != nil {
		t.Fatal("an emptied host kept the buffers of its queues")
	}
}

// TestManyKeysWithinBudget: a host with 1,500 fairness keys (more than its 64 lanes), one webhook
// each, announced faster than it sends, never keeps more than its window
// and still delivers every one.
func TestManyKeysWithinBudget(t *testing.T) {
	pol := Policy{Window: 32, MaxLanes: 64}
	f := newFixture(t, pol, 1<<20)
	now := f.clock
	const keys = 1500
	for i := range keys {
		f.add(func(m *spool.Message) { m.Fairness = fmt.Sprint("key-", i) })
		if i%50 == 0 {
			if m := f.next(now); m != nil {
				f.done(m)
			}
			f.upkeep(now)
		}
		if f.e.kept > pol.Window {
			t.Fatalf("after %d keys the host keeps %d webhooks, window %d", i+1, f.e.kept, pol.Window)
		}
	}
	if left := f.drainWithin(t, now, pol.Window); left != 0 {
		t.Fatalf("%d webhooks never delivered", left)
	}
}

// drainWithin is drain, failing if the host keeps more than window at
// any step; it returns how many webhooks are left queued in the spool.
func (f *fixture) drainWithin(t *testing.T, now time.Time, window int) int {
	for step := 0; ; step++ {
		if step > 1_000_000 {
			t.Fatal("the host never drained")
		}
		m := f.next(now)
		if m == nil {
			f.upkeep(now)
			if m = f.next(now); m == nil {
				break
			}
		}
		f.done(m)
		if f.e.kept > window {
			t.Fatalf("the host keeps %d webhooks, window %d", f.e.kept, window)
		}
	}
	return int(f.sp.HostUsage(testHost).Messages)
}

// TestHostsShareEqualPolicies: hosts of one Shared given equal settings
// point to one Policy; a host given other settings (a reload) gets its
// own, and the others keep theirs unchanged; a batching host keeps its
// own.
func TestHostsShareEqualPolicies(t *testing.T) {
	sh := NewShared(nil, nil, nil)
	host := func(name string, p Policy) *Host {
		return New(Options{Name: name, Shared: sh, Policy: p})
	}
	a := host("a.example", Policy{Window: 32, Weights: map[string]int{"k": 2}})
	b := host("b.example", Policy{Window: 32, Weights: map[string]int{"k": 2}})
	c := host("c.example", Policy{Window: 32, Weights: map[string]int{"k": 3}})
	if a.pol != b.pol {
		t.Fatal("two hosts with equal settings hold a policy each")
	}
	if a.pol == c.pol || c.pol.Weights["k"] != 3 {
		t.Fatalf("a host with other weights shares a policy: %+v", c.pol)
	}
	b.SetPolicy(Policy{Window: 8})
	if b.pol == a.pol || b.pol.Window != 8 || a.pol.Window != 32 || a.pol.Weights["k"] != 2 {
		t.Fatalf("a reload of one host changed another's: a %+v, b %+v", a.pol, b.pol)
	}
	if b.pol.Stage != 1 || b.pol.MaxLanes != defaultMaxLanes {
		t.Fatalf("a shared policy was not filled in: %+v", b.pol)
	}
	batch := &Batch{MaxEvents: 10}
	d := host("d.example", Policy{Window: 32, Batch: batch})
	e := host("e.example", Policy{Window: 32, Batch: batch})
	if d.pol == e.pol || d.pol.Batch != batch {
		t.Fatal("batching hosts share a policy")
	}
}

package window

import (
	"slices"
	"testing"

	"github.com/hookpace/hookpace/spool"
)

// TestPlainHostRests: a plain host that has delivered all it was
// announced gives back its default lane and unit at rest, and after it
// delivers what comes next in order, each once, what did not fit its
// window read from the spool, as a host that never rested would.
func TestPlainHostRests(t *testing.T) {
	f := newFixture(t, Policy{Window: 4, MaxLanes: 64}, 1<<20)
	now := f.clock
	for range 6 {
		f.add(nil)
	}
	if f.w.Rest() {
		t.Fatal("at rest with webhooks announced")
	}
	m := f.next(now)
	if f.w.Rest() {
		t.Fatal("at rest with a webhook out")
	}
	f.done(m)
	if n := f.drain(now); n != 5 {
		t.Fatalf("%d delivered, want 5", n)
	}
	if !f.w.Rest() || f.w.inMemory != nil {
		t.Fatal("a drained plain host did not rest")
	}
	if f.w.Held() != 0 || f.w.Waiting() != 0 || f.w.Retrying() != 0 || f.w.Room() != 4 || f.w.Lanes() != 1 ||
		!f.w.Settled() || f.w.Loading() || f.w.OnDisk() || f.w.Status() != nil {
		t.Fatalf("at rest: held %d, waiting %d, retrying %d, room %d, lanes %d, settled %v, loading %v, on disk %v, status %v; want as a new host's",
			f.w.Held(), f.w.Waiting(), f.w.Retrying(), f.w.Room(), f.w.Lanes(), f.w.Settled(), f.w.Loading(), f.w.OnDisk(), f.w.Status())
	}
	f.w.Unspill()
	f.w.SetPolicy(Policy{Window: 4, MaxLanes: 64, Weights: map[string]int{"": 3}})
	if f.w.inMemory != nil {
		t.Fatal("a reload woke a host at rest")
	}

	var want []uint64
	for range 10 { // more than the window: the rest waits on disk
		want = append(want, f.add(nil).ID)
	}
	var got []uint64
	for step := 0; len(got) < len(want) && step < 100; step++ {
		if m := f.next(now); m != nil {
			got = append(got, m.ID)
			f.done(m)
			continue
		}
		f.upkeep(now)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after rest delivered %v, want %v", got, want)
	}
	if w := f.w.lanes.def.unit.weight; w != 3 {
		t.Fatalf("woken with weight %d, want the reload's 3", w)
	}
	if f.next(now) != nil {
		t.Fatal("a webhook delivered twice")
	}
	f.upkeep(now)
	if !f.w.Rest() {
		t.Fatal("did not rest again once drained")
	}

	f.add(func(m *spool.Message) { m.Fairness = "tenant-1" })
	if f.w.Rest() {
		t.Fatal("at rest with a keyed webhook held")
	}
	if n := f.drain(now); n != 1 {
		t.Fatalf("%d delivered, want 1", n)
	}
	if f.w.Rest() {
		t.Fatal("a host that has had keyed webhooks rested: its status would change")
	}
}

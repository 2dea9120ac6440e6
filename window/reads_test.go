package window

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// appendOnly queues a webhook in the spool without announcing it to the
// Host: one queued before a start.
func (f *fixture) appendOnly(set func(m *spool.Message)) *spool.Message {
	f.t.Helper()
	m := &spool.Message{Host: testHost, Method: "POST", URL: "http://" + testHost + "/", Enqueued: f.clock, Body: []byte(`{}`)}
	if set != nil {
		set(m)
	}
	if err := f.sp.Append(context.Background(), m, 0); err != nil {
		f.t.Fatal(err)
	}
	return m
}

// TestResume: at a start, a Host reads back everything its host has
// queued, every lane, even more lanes than it may hold at once, each
// webhook once.
func TestResume(t *testing.T) {
	for _, maxLanes := range []int{64, 3} {
		f := newFixture(t, Policy{Window: 4, MaxLanes: maxLanes}, 1<<20)
		want := map[uint64]bool{}
		for i := range 12 {
			m := f.appendOnly(func(m *spool.Message) {
				if i%4 > 0 {
					m.Fairness = key(i % 4)
				}
				if i%3 == 0 {
					m.Priority = spool.PriorityHigh
				}
			})
			want[m.ID] = true
		}
		f.w.Resume()
		if !f.w.OnDisk() || f.w.Settled() {
			t.Fatalf("max lanes %d: resumed, the host has nothing on disk", maxLanes)
		}
		if f.w.Lanes() > maxLanes {
			t.Fatalf("max lanes %d: the host holds %d lanes", maxLanes, f.w.Lanes())
		}
		for _, id := range f.handOut() {
			if !want[id] {
				t.Fatalf("max lanes %d: webhook %d handed out twice or never queued", maxLanes, id)
			}
			delete(want, id)
		}
		if len(want) != 0 {
			t.Fatalf("max lanes %d: %d webhooks never handed out\n%s", maxLanes, len(want), f.dump())
		}
		if f.e.most > 4 {
			t.Fatalf("max lanes %d: the host kept %d, window 4", maxLanes, f.e.most)
		}
	}
}

// TestNewKeyMakesRoom: a new key's first webhook, announced while the
// window is full, takes the place of the newest webhook of the fullest
// lane (which goes back to disk) and waits one turn, not for a load; when
// every lane holds one webhook, it waits on disk for the next load.
func TestNewKeyMakesRoom(t *testing.T) {
	f := newFixture(t, Policy{Window: 4, Stage: 1}, 1<<20)
	var plain []uint64
	for range 4 {
		plain = append(plain, f.add(nil).ID)
	}
	k := f.add(func(m *spool.Message) { m.Fairness = "k" })
	if f.e.kept != 4 || f.w.lanes.get(k.Lane()).q.Len() != 1 {
		t.Fatalf("the new key's webhook is not held in a full window (keeps %d)", f.e.kept)
	}
	want := []uint64{plain[0], k.ID, plain[1], plain[2], plain[3]}
	if ids := f.handOut(); !slices.Equal(ids, want) {
		t.Fatalf("handed out %v, want %v", ids, want)
	}

	// One webhook in each lane: nothing to let go of.
	f.add(nil)
	f.add(func(m *spool.Message) { m.Fairness = "k" })
	f.e.budget = 2 // no more fits in memory
	j := f.add(func(m *spool.Message) { m.Fairness = "j" })
	if f.w.Held() != 2 {
		t.Fatalf("the host holds %d, want the first two", f.w.Held())
	}
	f.e.budget = 1 << 20
	if ids := f.handOut(); len(ids) != 3 || ids[2] != j.ID {
		t.Fatalf("handed out %v, want j's webhook %d last", ids, j.ID)
	}
}

// TestLoadFails: a load the dispatcher can't start (it stops) is tried at
// the next upkeep; one that fails to read is tried again a second later,
// and nothing is lost or read twice.
func TestLoadFails(t *testing.T) {
	f, r := newFaultyFixture(t, Policy{Window: 2})
	want := map[uint64]bool{}
	for range 6 {
		want[f.add(nil).ID] = true
	}
	for range 2 {
		f.done(f.next(f.clock))
	}
	f.e.stopping = true
	f.w.Upkeep(f.clock, time.Time{}, true)
	if f.w.Loading() || len(f.e.reads) != 0 || !f.w.OnDisk() {
		t.Fatal("a read started on a stopping dispatcher")
	}
	f.e.stopping = false
	r.fail = errDisk
	f.w.Upkeep(f.clock, time.Time{}, true)
	if !f.w.Loading() {
		t.Fatal("no read started")
	}
	f.e.runReads()
	if f.w.Held() != 0 || !slices.Contains(f.e.wakes, f.clock.Add(time.Second)) {
		t.Fatalf("after a failed read: holds %d, wakes %v; want none and one in a second", f.w.Held(), f.e.wakes)
	}
	f.clock = f.clock.Add(time.Second)
	if n := len(f.handOut()); n != 4 {
		t.Fatalf("handed out %d after the failure, want the 4 left", n)
	}
}

// TestUnstage: what was staged while the host could not send goes back
// to its lanes, and is picked again with what came since: a higher
// priority first, the rest in their order.
func TestUnstage(t *testing.T) {
	f := newFixture(t, Policy{Window: 8, Stage: 2}, 1<<20)
	a, b := f.add(nil), f.add(nil)
	f.w.stage()
	if f.w.ready.Len() != 2 {
		t.Fatalf("%d staged, want 2", f.w.ready.Len())
	}
	hi := f.add(func(m *spool.Message) { m.Priority = spool.PriorityHigh })
	f.w.Unstage()
	f.w.Unstage() // nothing staged: nothing to do
	if f.w.ready.Len() != 0 || f.w.Waiting() != 3 {
		t.Fatalf("unstaged: %d staged, %d waiting", f.w.ready.Len(), f.w.Waiting())
	}
	if ids := f.handOut(); !slices.Equal(ids, []uint64{hi.ID, a.ID, b.ID}) {
		t.Fatalf("handed out %v, want %d, %d, %d", ids, hi.ID, a.ID, b.ID)
	}
}

// TestReweigh: reloaded fairness weights apply from each key's next
// turn.
func TestReweigh(t *testing.T) {
	f := newFixture(t, Policy{Window: 16}, 1<<20)
	for range 6 {
		f.add(func(m *spool.Message) { m.Fairness = "a" })
		f.add(func(m *spool.Message) { m.Fairness = "b" })
	}
	f.w.SetPolicy(Policy{Window: 16, Weights: map[string]int{"a": 2}})
	var keys []string
	for range 8 {
		m := f.next(f.clock)
		keys = append(keys, m.Fairness)
		f.done(m)
	}
	if want := []string{"a", "b", "a", "a", "b", "a", "a", "b"}; !slices.Equal(keys, want) {
		t.Fatalf("turns %v, want %v", keys, want)
	}
}

// TestLanesCounted: Lanes counts the default lane and each lane held,
// and a lane with nothing left is forgotten.
func TestLanesCounted(t *testing.T) {
	f := newFixture(t, Policy{Window: 16}, 1<<20)
	if f.w.Lanes() != 1 {
		t.Fatalf("a new host holds %d lanes, want its default one", f.w.Lanes())
	}
	f.add(func(m *spool.Message) { m.Fairness = "a" })
	f.add(func(m *spool.Message) { m.Fairness = "a"; m.Priority = spool.PriorityLow })
	f.add(func(m *spool.Message) { m.Fairness = "b" })
	if f.w.Lanes() != 4 {
		t.Fatalf("%d lanes, want 4", f.w.Lanes())
	}
	f.handOut()
	f.upkeep(f.clock)
	if f.w.Lanes() != 1 {
		t.Fatalf("drained, %d lanes, want the default one", f.w.Lanes())
	}
}

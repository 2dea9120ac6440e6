package window

import (
	"slices"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// spillUntil is how far ahead the spill tests' hosts are blocked.
const spillUntil = 30 * time.Second

// TestSpillRefused: a host that can't send for a while keeps what it
// holds whenever reading it again from the spool could change what is
// sent, when, or whether it dies: something of it is out or being read,
// it batches, a webhook waits as an id, a retry is a batch or falls after
// the block, or a webhook's max_age ends before it.
func TestSpillRefused(t *testing.T) {
	cases := []struct {
		name string
		pol  Policy
		// set puts the host, which holds three webhooks of key "a"
		// loaded and one staged, in the state the case names.
		set func(f *fixture)
	}{
		{"a webhook out", Policy{}, func(f *fixture) { f.next(f.clock) }},
		{"a read under way", Policy{}, func(f *fixture) {
			f.add(func(m *spool.Message) { m.Fairness = "b" })
			f.add(func(m *spool.Message) { m.Fairness = "b" })
			f.e.budget = f.e.kept // b's webhooks wait on disk for a load
			f.add(func(m *spool.Message) { m.Fairness = "b" })
			f.e.budget = 1 << 20
			if f.readAhead() == 0 {
				f.t.Fatal("no read under way")
			}
		}},
		{"batching", Policy{Batch: &Batch{MaxEvents: 4, MaxBytes: 1 << 20, Size: func(*spool.Message) int { return 2 }}, Stage: 4}, nil},
		{"a webhook delayed", Policy{}, func(f *fixture) {
			f.add(func(m *spool.Message) { m.NotBefore = f.clock.Add(time.Hour) })
		}},
		{"a webhook parked behind its ordering key", Policy{}, func(f *fixture) {
			f.add(func(m *spool.Message) { m.Ordering = "o" })
			f.add(func(m *spool.Message) { m.Ordering = "o" })
		}},
		{"the lanes being listed", Policy{}, func(f *fixture) {
			f.w.untrack() // a webhook waits in a lane not held
			f.w.Upkeep(f.clock, time.Time{}, true)
			if !f.w.lanes.r().discovering {
				f.t.Fatal("the host is not listing its lanes")
			}
		}},
		{"a batch waiting for its retry", Policy{}, func(f *fixture) {
			m := f.next(f.clock)
			f.e.out--
			f.w.RetryBatchAt(f.clock.Add(time.Second), []*spool.Message{m})
		}},
		{"a retry due after the block", Policy{}, func(f *fixture) {
			m := f.next(f.clock)
			f.e.out--
			f.w.RetryAt(f.clock.Add(spillUntil+time.Second), m)
		}},
		{"a webhook's max_age ending before the block", Policy{MaxAge: spillUntil - time.Second}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.pol.Window = 16
			f := newFixture(t, c.pol, 1<<20)
			for range 3 {
				f.add(func(m *spool.Message) { m.Fairness = "a" })
			}
			f.w.stage()
			if c.set != nil {
				c.set(f)
			}
			held, kept := f.w.Held(), f.e.kept
			f.w.Upkeep(f.clock, f.clock.Add(spillUntil), true)
			if f.w.Held() != held || f.e.kept != kept {
				t.Fatalf("the host let go: holds %d (was %d), keeps %d (was %d)", f.w.Held(), held, f.e.kept, kept)
			}
			if !f.w.mayLoad(f.clock) {
				t.Fatal("the host stopped reading without letting go")
			}
		})
	}
}

// TestSpillNothingHeld: a host that holds nothing has nothing to let go
// of, and goes on reading.
func TestSpillNothingHeld(t *testing.T) {
	f := newFixture(t, Policy{Window: 8}, 1<<20)
	f.w.Upkeep(f.clock, f.clock.Add(spillUntil), true)
	if !f.w.mayLoad(f.clock) {
		t.Fatal("a host that held nothing stopped reading")
	}
	f.add(nil)
	if f.w.Held() != 1 {
		t.Fatalf("the host holds %d, want the webhook announced", f.w.Held())
	}
}

// TestSpillNotAllowed: a spill waits while the dispatcher says it may not
// let go (a purge reads the host's queue).
func TestSpillNotAllowed(t *testing.T) {
	f := newFixture(t, Policy{Window: 8}, 1<<20)
	f.add(nil)
	f.w.Upkeep(f.clock, f.clock.Add(spillUntil), false)
	if f.w.Held() != 1 || f.e.kept != 1 {
		t.Fatalf("the host let go during a purge: holds %d, keeps %d", f.w.Held(), f.e.kept)
	}
}

// TestSpillReadsAgainInOrder: a host blocked for long lets go of all it
// holds (a retry, what it staged, its lanes, the lanes waiting for a
// load), keeps nothing, reads nothing until the block ends, and then
// reads every webhook again exactly once, with its attempts as recorded:
// the keys come back in the order they would have gone, the key with the
// retry first, then the one with a pick staged, then the rotation's.
func TestSpillReadsAgainInOrder(t *testing.T) {
	pol := Policy{Window: 12, Stage: 1, MaxLanes: 64}
	f := newFixture(t, pol, 1<<20)
	all := map[uint64]bool{}
	add := func(key string) {
		all[f.add(func(m *spool.Message) { m.Fairness = key }).ID] = true
	}
	for range 3 {
		add("a")
		add("b")
		add("c")
	}
	// Handed out in turn: a, b, c. a's fails and waits for its retry,
	// b's and c's are delivered.
	retried := f.next(f.clock)
	if retried.Fairness != "a" {
		t.Fatalf("first pick of key %q, want a", retried.Fairness)
	}
	retried.Attempts, retried.LastStatus = 1, 503
	f.sp.Update(retried)
	f.e.out--
	f.w.RetryAt(f.clock.Add(time.Second), retried)
	for _, want := range []string{"b", "c"} {
		m := f.next(f.clock)
		if m.Fairness != want {
			t.Fatalf("pick of key %q, want %q", m.Fairness, want)
		}
		f.done(m) // waits for the writer: the retry's Update is durable
		delete(all, m.ID)
	}
	f.w.stage() // a's next turn, staged
	// More of d than the window has room for: on disk, waiting for a load;
	// then e, which joins the rotation after d.
	for range 12 {
		add("d")
	}
	add("e")
	if !f.w.OnDisk() {
		t.Fatal("nothing of the host's waits on disk")
	}
	if f.w.Held() == 0 || f.e.kept == 0 {
		t.Fatal("the host holds nothing before the spill")
	}

	blocked := f.clock.Add(spillUntil)
	if wake := f.w.Upkeep(f.clock, blocked, true); !wake.Equal(blocked) {
		t.Fatalf("upkeep wakes at %v, want the block's end %v", wake, blocked)
	}
	if f.w.Held() != 0 || f.e.kept != 0 || f.w.Room() != pol.Window {
		t.Fatalf("after the spill the host holds %d, keeps %d, has room for %d of %d", f.w.Held(), f.e.kept, f.w.Room(), pol.Window)
	}
	if len(f.e.reads) != 0 {
		t.Fatalf("%d reads started before the block's end", len(f.e.reads))
	}
	// During the block, a webhook of a key let go of waits on disk; one
	// of a new key is held until the next pump's upkeep lets go of it too.
	add("d")
	if f.w.Held() != 0 {
		t.Fatal("a webhook of a key let go of is held during the block")
	}
	add("f")
	f.w.Upkeep(f.clock, blocked, true)
	if f.w.Held() != 0 || f.e.kept != 0 {
		t.Fatalf("a webhook announced during the block is held: holds %d, keeps %d", f.w.Held(), f.e.kept)
	}
	f.clock = f.clock.Add(spillUntil / 2)
	if wake := f.w.Upkeep(f.clock, time.Time{}, true); !wake.Equal(blocked) || len(f.e.reads) != 0 {
		t.Fatalf("upkeep during the block: wakes at %v, %d reads, want %v and none", wake, len(f.e.reads), blocked)
	}

	f.clock = blocked
	var order []string
	for step := 0; len(all) > 0; step++ {
		if step > 1000 {
			t.Fatalf("%d webhooks never came back\n%s", len(all), f.dump())
		}
		m := f.next(f.clock)
		if m == nil {
			f.upkeep(f.clock)
			continue
		}
		if !all[m.ID] {
			t.Fatalf("webhook %d handed out twice", m.ID)
		}
		if m.ID == retried.ID && (m.Attempts != 1 || m.LastStatus != 503) {
			t.Fatalf("the retried webhook came back with attempts %d, status %d: want 1, 503", m.Attempts, m.LastStatus)
		}
		if m.Fairness != "f" && !slices.Contains(order, m.Fairness) {
			order = append(order, m.Fairness)
		}
		f.done(m)
		delete(all, m.ID)
	}
	// a holds the retry and the pick staged; then the rotation: b, c, d
	// and e. (f was in the rotation while the others waited on disk.)
	if want := []string{"a", "b", "c", "d", "e"}; !slices.Equal(order, want) {
		t.Fatalf("keys came back in the order %v, want %v", order, want)
	}
	f.upkeep(f.clock)
	if !f.w.Settled() || f.e.kept != 0 {
		t.Fatalf("drained, the host is not settled: holds %d, keeps %d\n%s", f.w.Held(), f.e.kept, f.dump())
	}
}

// TestSpillForAMinuteAtMost: a host blocked for hours reads again after a
// minute, in case its gate frees sooner by a way that does not tell it;
// Unspill (the gate freed it) lets it read at once.
func TestSpillForAMinuteAtMost(t *testing.T) {
	f := newFixture(t, Policy{Window: 8}, 1<<20)
	f.add(nil)
	if wake := f.w.Upkeep(f.clock, f.clock.Add(3*time.Hour), true); !wake.Equal(f.clock.Add(time.Minute)) {
		t.Fatalf("a host blocked for 3h wakes at %v, want in a minute", wake.Sub(f.clock))
	}
	if f.w.Held() != 0 {
		t.Fatal("the host kept what it held")
	}
	f.clock = f.clock.Add(time.Minute)
	f.upkeep(f.clock)
	if f.w.Held() != 1 {
		t.Fatalf("a minute on, the host holds %d, want its webhook read again", f.w.Held())
	}

	f.w.Upkeep(f.clock, f.clock.Add(time.Hour), true)
	if f.w.Held() != 0 || f.w.mayLoad(f.clock) {
		t.Fatal("the host did not let go a second time")
	}
	f.w.Unspill()
	f.upkeep(f.clock)
	if f.w.Held() != 1 {
		t.Fatalf("unspilled, the host holds %d, want its webhook read again at once", f.w.Held())
	}
}

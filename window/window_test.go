package window

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

type orderID struct{ fairness, ordering string }

// TestHandedOutUntilDone drives a Host alone (a real spool, no
// dispatcher) through a random mix of arrivals, picks, retries, holds
// and deliveries, on a plain host and on hosts with many fairness keys,
// priorities and ordering keys, and holds it to its properties at every
// step: a webhook is handed out only while it is not out already and
// never after it is done; never two webhooks of one ordering key are out
// at once; the Host never keeps more webhooks than its window; and in
// the end every webhook announced was handed out and done.
func TestHandedOutUntilDone(t *testing.T) {
	cases := []struct {
		name  string
		keys  int
		order int
	}{{"plain", 0, 0}, {"keys", 40, 0}, {"keys and order", 12, 4}}
	for _, c := range cases {
		for seed := range uint64(seeds) {
			t.Run(fmt.Sprint(c.name, "/seed=", seed), func(t *testing.T) {
				handedOutUntilDone(t, seed, c.keys, c.order)
			})
		}
	}
}

func handedOutUntilDone(t *testing.T, seed uint64, keys, orders int) {
	r := rand.New(rand.NewPCG(seed, 47))
	pol := Policy{Window: 8, Stage: 1, MinShare: 0.1, MaxLanes: 16}
	f := newFixture(t, pol, 1<<20)
	prios := []spool.Priority{spool.PriorityHigh, spool.PriorityNormal, spool.PriorityLow}
	added := map[uint64]bool{}
	out := map[uint64]*spool.Message{} // handed out, not yet back or done
	doneIDs := map[uint64]bool{}
	active := map[orderID]uint64{} // the ordering keys with a webhook handed out and not done
	now := f.clock
	pick := func() bool {
		m := f.next(now)
		if m == nil {
			return false
		}
		switch {
		case !added[m.ID]:
			t.Fatalf("webhook %d handed out, never announced", m.ID)
		case out[m.ID] != nil:
			t.Fatalf("webhook %d handed out while out already", m.ID)
		case doneIDs[m.ID]:
			t.Fatalf("webhook %d handed out after it was done", m.ID)
		}
		if m.Ordering != "" {
			k := orderID{m.Fairness, m.Ordering}
			if id, ok := active[k]; ok && id != m.ID {
				t.Fatalf("webhook %d of ordering key %v handed out while %d of it is not done", m.ID, k, id)
			}
			active[k] = m.ID
		}
		out[m.ID] = m
		return true
	}
	settle := func(m *spool.Message, how int) {
		delete(out, m.ID)
		switch how {
		case 0: // a retry, due at once
			m.Attempts++
			f.e.out--
			f.w.RetryAt(now, m)
		case 1: // held (a 429): first in line again
			f.e.out--
			f.w.ready.PushFront(m)
		default:
			f.done(m)
			doneIDs[m.ID] = true
			if m.Ordering != "" {
				delete(active, orderID{m.Fairness, m.Ordering})
			}
		}
	}
	anyOut := func() *spool.Message { // the oldest out: a run repeats by its seed
		if len(out) == 0 {
			return nil
		}
		return out[slices.Min(slices.Collect(maps.Keys(out)))]
	}
	check := func(step int) {
		if f.e.kept > pol.Window {
			t.Fatalf("step %d: the host keeps %d webhooks, window %d", step, f.e.kept, pol.Window)
		}
	}
	for step := range 500 {
		switch x := r.IntN(10); {
		case x < 4:
			m := f.add(func(m *spool.Message) {
				if keys > 0 {
					m.Fairness = key(r.IntN(keys))
					m.Priority = prios[r.IntN(3)]
				}
				if orders > 0 && r.IntN(2) == 0 {
					o := r.IntN(orders)
					m.Fairness, m.Ordering = key(o), fmt.Sprint("o", o)
				}
			})
			added[m.ID] = true
		case x < 6:
			for range 1 + r.IntN(3) {
				pick()
			}
		case x < 9:
			if m := anyOut(); m != nil {
				settle(m, min(r.IntN(6), 2))
			}
		default:
			f.upkeep(now)
		}
		check(step)
	}
	for step := 0; len(doneIDs) < len(added); step++ {
		if step > 100_000 {
			t.Fatalf("%d of %d webhooks done; the rest never handed out\n%s", len(doneIDs), len(added), f.dump())
		}
		for pick() {
			check(step)
		}
		for _, id := range slices.Sorted(maps.Keys(out)) {
			settle(out[id], 2)
		}
		f.upkeep(now)
		check(step)
	}
	if f.w.Held() != 0 || f.e.kept != 0 {
		t.Fatalf("all done, the host still holds %d (keeps %d)", f.w.Held(), f.e.kept)
	}
}

// TestSelectWhilePicksOut: a purge's selection, made while webhooks are
// out, in a retry, held in lanes, parked behind their ordering key and
// still on disk, takes exactly what it should: the webhooks selected that
// the Host holds, in memory or as ids, and none that is out; those not
// read yet it reports as such. Afterwards no webhook purged is handed out
// again, and every other one is.
func TestSelectWhilePicksOut(t *testing.T) {
	for seed := range uint64(seeds * 2) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			pol := Policy{Window: 48, Stage: 1, MinShare: 0.1, MaxLanes: 64}
			f := newFixture(t, pol, 1<<20)
			now := f.clock
			var all []*spool.Message
			for i := range 60 {
				all = append(all, f.add(func(m *spool.Message) {
					m.Fairness = key(i % 6)
					if i%6 == 0 { // one ordering key, key-0's: all but its first parked once read
						m.Ordering = "o"
					}
				}))
			}
			out := map[uint64]*spool.Message{}
			for range 6 {
				if m := f.next(now); m != nil {
					out[m.ID] = m
				}
			}
			ids := slices.Sorted(maps.Keys(out))
			if len(ids) > 0 { // one goes back to wait for a retry
				m := out[ids[0]]
				delete(out, m.ID)
				f.e.out--
				f.w.RetryAt(now.Add(time.Hour), m)
			}
			// A read of lanes started before the purge, and done reading
			// (from the spool, off the lock), is applied after it.
			delivered := map[uint64]bool{}
			if ids := slices.Sorted(maps.Keys(out)); len(ids) > 0 { // room for the read
				m := out[ids[0]]
				f.done(m)
				delete(out, m.ID)
				delivered[m.ID] = true
			}
			for range 4 {
				all = append(all, f.add(func(m *spool.Message) { m.Fairness = key(7) }))
			}
			if f.readAhead() == 0 {
				t.Fatal("no read under way at the purge")
			}
			var sel []*spool.Message
			want := map[uint64]bool{}
			for _, m := range all {
				if !delivered[m.ID] && r.IntN(2) == 0 { // what the spool still has
					sel = append(sel, m)
					want[m.ID] = true
				}
			}
			held, refs := f.w.Select(sel)
			var take []*spool.Message
			for _, m := range sel {
				inHeld, inRefs, read := held[m.ID] != nil, refs[m.ID], f.w.WasRead(m)
				_, isOut := out[m.ID]
				switch {
				case isOut && (inHeld || inRefs || !read):
					t.Fatalf("webhook %d is out, and was selected as held %v, waiting as an id %v, unread %v", m.ID, inHeld, inRefs, !read)
				case !isOut && !inHeld && !inRefs && read:
					t.Fatalf("webhook %d, not out, was read but neither held nor waiting as an id", m.ID)
				case inHeld && inRefs:
					t.Fatalf("webhook %d both held and waiting as an id", m.ID)
				}
				if !isOut {
					take = append(take, m)
					if !inHeld && !inRefs {
						f.e.purged[m.ID] = true // a load may still read it
					}
				}
			}
			for id := range held {
				if !want[id] {
					t.Fatalf("webhook %d held was not selected", id)
				}
				f.e.Unkeep(held[id])
				f.w.Done(held[id])
			}
			for id := range refs {
				if !want[id] {
					t.Fatalf("webhook %d waiting as an id was not selected", id)
				}
			}
			if _, err := f.sp.Drop(take, "test"); err != nil {
				t.Fatal(err)
			}
			f.applyReads()
			for _, id := range slices.Sorted(maps.Keys(out)) {
				f.done(out[id])
				delivered[id] = true
			}
			f.w.retry.unbatch()
			later := now.Add(2 * time.Hour)
			for step := 0; ; step++ {
				if step > 10_000 {
					t.Fatal("the host never drained")
				}
				m := f.next(later)
				if m == nil {
					f.upkeep(later)
					if m = f.next(later); m == nil {
						break
					}
				}
				if want[m.ID] && !delivered[m.ID] {
					t.Fatalf("purged webhook %d handed out", m.ID)
				}
				if delivered[m.ID] {
					t.Fatalf("webhook %d handed out twice", m.ID)
				}
				f.done(m)
				delivered[m.ID] = true
			}
			for _, m := range all {
				if !want[m.ID] && !delivered[m.ID] {
					t.Fatalf("webhook %d, not purged, never handed out", m.ID)
				}
			}
		})
	}
}

// seeds is how many random runs each property test makes of each case;
// WINDOW_SEEDS raises it to look for a rare failure.
var seeds = func() int {
	if s := os.Getenv("WINDOW_SEEDS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			return n
		}
	}
	return 4
}()

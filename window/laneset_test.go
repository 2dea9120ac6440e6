package window

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// TestLaneSetRotation holds the lane set alone, with no dispatcher, gate
// or spool, to its rules under a random mix of arrivals and picks over
// weighted keys and priorities: every webhook placed in a lane is picked
// once and only once; the count of webhooks in memory is what the lanes
// hold; a key that gets work is picked within one rotation of the keys
// ahead of it (the sum of their weights); and once all is picked and
// settled, only the default lane is left.
func TestLaneSetRotation(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 47))
			weights := map[string]int{"k1": 3, "k2": 2}
			h := New(Options{Name: "p.example", Policy: Policy{Window: 32, Weights: weights, MinShare: 0.1}})
			ls := &h.lanes
			prios := []spool.Priority{spool.PriorityHigh, spool.PriorityNormal, spool.PriorityLow}

			var seq uint64
			placed, picked := map[uint64]bool{}, map[uint64]bool{}
			due := map[string]int{} // a key's latest pick by when it got work, in picks
			picks := 0
			place := func(key string, p spool.Priority) {
				seq++
				m := &spool.Message{ID: seq, Host: h.name, Fairness: key, Priority: p}
				l := h.lane(m.Lane(), 0)
				if u := ls.unit(key); u == nil || !u.inRing {
					if _, waiting := due[key]; !waiting {
						ahead := 0
						for _, u := range ls.ring.buf[ls.ring.head:] {
							ahead += u.weight
						}
						due[key] = picks + ahead + 1
					}
				}
				l.q.Push(m) // as admit places a webhook read from the spool
				ls.mem++
				ls.hasWork(l.unit)
				placed[m.ID] = true
			}
			pick := func() bool {
				m := h.pick()
				if m == nil {
					return false
				}
				picks++
				if picked[m.ID] || !placed[m.ID] {
					t.Fatalf("pick %d: webhook %d picked twice or never placed", picks, m.ID)
				}
				picked[m.ID] = true
				if d, ok := due[m.Fairness]; ok {
					if picks > d {
						t.Fatalf("key %q got work and waited until pick %d, want by pick %d (one rotation)", m.Fairness, picks, d)
					}
					delete(due, m.Fairness)
				}
				h.settle(m) // it left for good
				return true
			}
			for range 3000 {
				if r.IntN(2) == 0 {
					place(fmt.Sprint("k", r.IntN(12)), prios[r.IntN(3)])
				} else {
					pick()
				}
				if held := len(placed) - len(picked); ls.mem != held {
					t.Fatalf("the lane set counts %d webhooks in memory, its lanes hold %d", ls.mem, held)
				}
			}
			for pick() {
			}
			if len(picked) != len(placed) {
				t.Fatalf("%d webhooks placed, %d picked", len(placed), len(picked))
			}
			if ls.count() != 1 || len(ls.units) != 0 || len(ls.outs) != 0 {
				t.Fatalf("drained, the lane set still holds %d lanes, %d keys, %d out", ls.count(), len(ls.units), len(ls.outs))
			}
		})
	}
}

// TestLaneSetPriorityShare: within one key, a lower priority with work
// gets at least MinShare of the key's turns while a higher one has
// work too.
func TestLaneSetPriorityShare(t *testing.T) {
	h := New(Options{Name: "p.example", Policy: Policy{Window: 32, MinShare: 0.2}})
	ls := &h.lanes
	var seq uint64
	for _, p := range []spool.Priority{spool.PriorityHigh, spool.PriorityLow} {
		l := h.lane(spool.Lane{Key: "k", Priority: p}, 0)
		for range 1000 {
			seq++
			l.q.Push(&spool.Message{ID: seq, Host: h.name, Fairness: "k", Priority: p})
			ls.mem++
		}
		ls.hasWork(l.unit)
	}
	low := 0
	for range 500 {
		m := h.pick()
		if m.Priority == spool.PriorityLow {
			low++
		}
		h.settle(m)
	}
	if low < 500*20/100 || low > 500*25/100 {
		t.Fatalf("low got %d of 500 picks while high had work, want its share of 20%% (100)", low)
	}
}

// TestMinShareExact: with min_share 0.1, every tenth pick of a key whose
// high priority has work goes to its low one, the first at the tenth.
func TestMinShareExact(t *testing.T) {
	u := &unit{lanes: [3]*lane{{}, nil, {}}}
	u.lanes[0].q.Push(&spool.Message{})
	u.lanes[2].q.Push(&spool.Message{})
	var got []int
	for i := 1; i <= 30; i++ {
		if u.choose(0.1) == u.lanes[2] {
			got = append(got, i)
		}
	}
	if fmt.Sprint(got) != "[10 20 30]" {
		t.Fatalf("low picked at %v, want [10 20 30]", got)
	}
}

// TestSettledNotReadAgain: a webhook that just left a capped host for
// good (its burial perhaps not written yet) is passed over when its lane,
// taken up again from its start, reads it from the spool.
func TestSettledNotReadAgain(t *testing.T) {
	f := newFixture(t, Policy{Window: 32}, 1<<20)
	h := f.w
	h.untrack()
	gone := &spool.Message{ID: 7, Host: testHost, Fairness: "k", Enqueued: time.Now()}
	h.settle(gone)
	l := h.lane(spool.Lane{Key: "k"}, 0)
	fresh := &spool.Message{ID: 9, Host: testHost, Fairness: "k", Enqueued: time.Now()}
	h.laneLoaded(l, []*spool.Message{gone, fresh}, 10, nil)
	if l.q.Len() != 1 || l.q.Peek().ID != 9 || l.cursor != 9 {
		t.Fatalf("lane holds %d (cursor %d), want only webhook 9", l.q.Len(), l.cursor)
	}
}

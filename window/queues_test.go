package window

import (
	"slices"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

func msgs(ids ...uint64) []*spool.Message {
	out := make([]*spool.Message, len(ids))
	for i, id := range ids {
		out[i] = &spool.Message{ID: id}
	}
	return out
}

func dequeIDs(q *deque) []uint64 {
	var ids []uint64
	for i := range q.Len() {
		ids = append(ids, q.At(i).ID)
	}
	return ids
}

// TestDeque: a deque is a FIFO that takes messages back at its front and
// lets any of them be taken out, the others keeping their order.
func TestDeque(t *testing.T) {
	cases := []struct {
		name string
		do   func(q *deque) []uint64 // what it took
		want []uint64                // what is left, front first
		took []uint64
	}{
		{"push and pop", func(q *deque) []uint64 { q.Pop(); q.Pop(); q.Push(msgs(6)[0]); return nil }, []uint64{3, 4, 5, 6}, nil},
		{"pop all, push again", func(q *deque) []uint64 {
			for q.Len() > 0 {
				q.Pop()
			}
			q.Push(msgs(9)[0])
			return nil
		}, []uint64{9}, nil},
		{"push front after a pop", func(q *deque) []uint64 { q.Pop(); q.PushFront(msgs(0)[0]); return nil }, []uint64{0, 2, 3, 4, 5}, nil},
		{"push front", func(q *deque) []uint64 { q.PushFront(msgs(0)[0]); return nil }, []uint64{0, 1, 2, 3, 4, 5}, nil},
		{"pop back", func(q *deque) []uint64 { return []uint64{q.popBack().ID} }, []uint64{1, 2, 3, 4}, []uint64{5}},
		{"take some", func(q *deque) []uint64 { return ids(q.TakeAt([]int{0, 2, 4})) }, []uint64{2, 4}, []uint64{1, 3, 5}},
		{"take after a pop", func(q *deque) []uint64 { q.Pop(); return ids(q.TakeAt([]int{1})) }, []uint64{2, 4, 5}, []uint64{3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var q deque
			for _, m := range msgs(1, 2, 3, 4, 5) {
				q.Push(m)
			}
			took := c.do(&q)
			if got := dequeIDs(&q); !slices.Equal(got, c.want) || !slices.Equal(took, c.took) {
				t.Fatalf("left %v, took %v; want %v, %v", got, took, c.want, c.took)
			}
			if c.want != nil && q.Peek().ID != c.want[0] {
				t.Fatalf("peek %d, want %d", q.Peek().ID, c.want[0])
			}
		})
	}
	var q deque
	if q.Peek() != nil {
		t.Fatal("an empty deque's front is not nil")
	}
}

func ids(ms []*spool.Message) []uint64 {
	var out []uint64
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

// TestRetryQueue: items come out soonest first, those due at once in the
// order they were added; a batch counts each member, and unbatched, its
// members are each due when it was.
func TestRetryQueue(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var r retryQueue
	if _, ok := r.PeekAt(); ok {
		t.Fatal("an empty queue has an item due")
	}
	m := msgs(1, 2, 3, 4, 5)
	r.Add(at(5), m[0])
	r.AddBatch(at(2), m[1:3])
	r.Add(at(2), m[3])
	r.Add(at(9), m[4])
	if r.Len() != 5 || len(r.Items()) != 4 {
		t.Fatalf("%d messages in %d items, want 5 in 4", r.Len(), len(r.Items()))
	}
	if it := r.Peek(); it.M != nil || !slices.Equal(ids(it.Batch), []uint64{2, 3}) {
		t.Fatalf("first item %+v, want the batch", it)
	}
	r.unbatch()
	var got []uint64
	var when []time.Time
	for _, it := range r.Items() {
		if it.M == nil {
			t.Fatal("a batch is left after Unbatch")
		}
		got, when = append(got, it.M.ID), append(when, it.At)
	}
	if !slices.Equal(got, []uint64{2, 3, 4, 1, 5}) || !when[0].Equal(at(2)) || !when[1].Equal(at(2)) {
		t.Fatalf("unbatched %v due %v", got, when)
	}
	for r.Len() > 0 {
		r.Pop()
	}
	if len(r.Items()) != 0 {
		t.Fatal("items left in an empty queue")
	}
}

// TestSelectRetries: a purge takes, of what waits for a retry, the
// webhooks selected, a batch's members each, and leaves the others due
// when they were.
func TestSelectRetries(t *testing.T) {
	f := newFixture(t, Policy{Window: 8, Batch: &Batch{MaxEvents: 4, MaxBytes: 1 << 20, Size: func(*spool.Message) int { return 2 }}, Stage: 4}, 1<<20)
	var all []*spool.Message
	for range 5 {
		all = append(all, f.add(nil))
	}
	for range 5 {
		f.next(f.clock)
		f.e.out--
	}
	f.w.RetryBatchAt(f.clock.Add(time.Second), all[0:2])
	f.w.RetryBatchAt(f.clock.Add(2*time.Second), all[2:3])
	f.w.RetryAt(f.clock.Add(3*time.Second), all[3])
	f.w.RetryAt(f.clock.Add(4*time.Second), all[4])
	held, refs := f.w.Select([]*spool.Message{all[1], all[2], all[4]})
	if len(refs) != 0 || len(held) != 3 || held[all[1].ID] == nil || held[all[2].ID] == nil || held[all[4].ID] == nil {
		t.Fatalf("selected %v, as ids %v", held, refs)
	}
	items := f.w.retry.Items()
	if len(items) != 2 || !slices.Equal(ids(items[0].Batch), []uint64{all[0].ID}) || items[1].M != all[3] ||
		!items[0].At.Equal(f.clock.Add(time.Second)) || f.w.Retrying() != 2 {
		t.Fatalf("left to retry: %+v", items)
	}
}

// TestStatusText: a host's lanes in a few words.
func TestStatusText(t *testing.T) {
	cases := []struct {
		st   *LaneStatus
		want string
	}{
		{nil, ""},
		{&LaneStatus{}, ""},
		{&LaneStatus{Busiest: []KeyStatus{{Key: "bulk", Queued: 3000}, {Queued: 2}}}, `keys bulk 3000, "" 2`},
		{&LaneStatus{Priorities: map[string]int{"normal": 5}}, ""},
		{&LaneStatus{Priorities: map[string]int{"high": 1, "low": 3000}}, "priority high 1, low 3000"},
		{&LaneStatus{Priorities: map[string]int{"high": 1, "normal": 2}}, "priority high 1, normal 2"},
		{&LaneStatus{Blocked: []BlockedKey{{Key: "o", On: "07", State: "next", Waiting: 5}}}, "o blocked on 07 (next), 5 waiting"},
		{&LaneStatus{Blocked: []BlockedKey{{Key: "o", On: "07", State: "retrying", Attempts: 2, LastError: "timeout", Waiting: 1}}},
			"o blocked on 07 (retrying, attempt 2: timeout), 1 waiting"},
		{&LaneStatus{Delayed: 3, OrderedDead: 1, LastDeadKey: "o-9", LastDeadWhy: "410"},
			"3 delayed; 1 dead letters in ordered keys (last o-9: 410)"},
	}
	for _, c := range cases {
		if got := c.st.Text(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.st, got, c.want)
		}
	}
}

package window

// The queues a host's window is made of: a FIFO that reuses its buffer
// (fifo), the deque of messages picked to go next (deque), and the
// messages waiting for their backoff (retryQueue).

import (
	"time"

	"github.com/hookpace/hookpace/spool"
)

// deque is a FIFO of messages that can also take one back at the front.
type deque struct {
	buf  []*spool.Message
	head int
}

// Len is how many messages q holds.
func (q *deque) Len() int { return len(q.buf) - q.head }

// Push puts m at the back.
func (q *deque) Push(m *spool.Message) {
	if q.head > 0 && q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	}
	q.buf = append(q.buf, m)
}

// Peek is the message at the front, nil if none.
func (q *deque) Peek() *spool.Message {
	if q.Len() == 0 {
		return nil
	}
	return q.buf[q.head]
}

// Pop removes the message at the front.
func (q *deque) Pop() {
	q.buf[q.head] = nil
	q.head++
}

// popBack removes and returns the message at the back.
func (q *deque) popBack() *spool.Message {
	m := q.buf[len(q.buf)-1]
	q.buf[len(q.buf)-1] = nil
	q.buf = q.buf[:len(q.buf)-1]
	return m
}

// At returns the i-th message from the front.
func (q *deque) At(i int) *spool.Message { return q.buf[q.head+i] }

// TakeAt removes the messages at positions idx (from the front, ascending)
// and returns them in that order; the others keep theirs.
func (q *deque) TakeAt(idx []int) []*spool.Message {
	out := make([]*spool.Message, 0, len(idx))
	w := q.head + idx[0]
	for r := w; r < len(q.buf); r++ {
		if len(out) < len(idx) && r == q.head+idx[len(out)] {
			out = append(out, q.buf[r])
			continue
		}
		q.buf[w] = q.buf[r]
		w++
	}
	clear(q.buf[w:])
	q.buf = q.buf[:w]
	return out
}

// PushFront puts m at the front, to be popped next.
func (q *deque) PushFront(m *spool.Message) {
	if q.head > 0 {
		q.head--
		q.buf[q.head] = m
		return
	}
	q.buf = append([]*spool.Message{m}, q.buf...)
}

// retryQueue holds messages waiting for their backoff, soonest first. It
// stays small (bounded by the window), so insertion keeps it sorted. An
// item is one message, or a batch that is retried whole.
type retryQueue struct {
	items []retryItem
	msgs  int // messages in items, batch members each
}

// retryItem is one message or one batch waiting for its backoff.
type retryItem struct {
	At    time.Time
	M     *spool.Message   // a message sent alone; nil for a batch
	Batch []*spool.Message // a batch's members, in the order they are sent
}

// Len is how many messages r holds, a batch's members each.
func (r *retryQueue) Len() int { return r.msgs }

// Items are r's items, soonest first; the caller must not change them.
func (r *retryQueue) Items() []retryItem { return r.items }

// Add queues m, due at at.
func (r *retryQueue) Add(at time.Time, m *spool.Message) {
	r.insert(retryItem{At: at, M: m})
}

// AddBatch queues ms, to be retried whole at at.
func (r *retryQueue) AddBatch(at time.Time, ms []*spool.Message) {
	r.insert(retryItem{At: at, Batch: ms})
}

func (r *retryQueue) insert(it retryItem) {
	i := len(r.items)
	for i > 0 && r.items[i-1].At.After(it.At) {
		i--
	}
	r.items = append(r.items, retryItem{})
	copy(r.items[i+1:], r.items[i:])
	r.items[i] = it
	r.msgs += max(len(it.Batch), 1)
}

// PeekAt is when the soonest item is due; false if r is empty.
func (r *retryQueue) PeekAt() (time.Time, bool) {
	if len(r.items) == 0 {
		return time.Time{}, false
	}
	return r.items[0].At, true
}

// Peek is the soonest item; r must not be empty.
func (r *retryQueue) Peek() retryItem { return r.items[0] }

// Pop removes the soonest item.
func (r *retryQueue) Pop() {
	r.msgs -= max(len(r.items[0].Batch), 1)
	r.items[0] = retryItem{}
	r.items = r.items[1:]
}

// unbatch replaces each batch with its members, each due when it was.
func (r *retryQueue) unbatch() {
	items := r.items
	r.items, r.msgs = nil, 0
	for _, it := range items {
		if it.Batch == nil {
			r.insert(it)
			continue
		}
		for _, m := range it.Batch {
			r.insert(retryItem{At: it.At, M: m})
		}
	}
}

// fifo is a queue that reuses its buffer.
type fifo[T any] struct {
	buf  []T
	head int
}

func (q *fifo[T]) len() int { return len(q.buf) - q.head }
func (q *fifo[T]) peek() T  { return q.buf[q.head] }
func (q *fifo[T]) push(v T) {
	if q.head > 0 && q.head >= len(q.buf)/2 {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
	q.buf = append(q.buf, v)
}

// pushFront puts v at the front, to be popped next.
func (q *fifo[T]) pushFront(v T) {
	if q.head > 0 {
		q.head--
		q.buf[q.head] = v
		return
	}
	q.buf = append([]T{v}, q.buf...)
}

func (q *fifo[T]) pop() T {
	v := q.buf[q.head]
	var zero T
	q.buf[q.head] = zero
	q.head++
	return v
}

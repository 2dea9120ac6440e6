package deliver

// The two per-host message queues: ready (FIFO, a 429'd message goes back
// to the front) and retry (ordered by when each message is due), and how
// a host picks what to send next from them.

import (
	"time"

	"github.com/hookpace/hookpace/spool"
)

// deque is a FIFO of messages that can also take one back at the front.
type deque struct {
	buf  []*spool.Message
	head int
}

func (q *deque) len() int { return len(q.buf) - q.head }
func (q *deque) push(m *spool.Message) {
	if q.head > 0 && q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	}
	q.buf = append(q.buf, m)
}
func (q *deque) peek() *spool.Message {
	if q.len() == 0 {
		return nil
	}
	return q.buf[q.head]
}
func (q *deque) pop() {
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

// at returns the i-th message from the front.
func (q *deque) at(i int) *spool.Message { return q.buf[q.head+i] }

// takeAt removes the messages at positions idx (from the front, ascending)
// and returns them in that order; the others keep theirs.
func (q *deque) takeAt(idx []int) []*spool.Message {
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

func (q *deque) pushFront(m *spool.Message) {
	if q.head > 0 {
		q.head--
		q.buf[q.head] = m
		return
	}
	q.buf = append([]*spool.Message{m}, q.buf...)
}

// retryQueue holds messages waiting for their backoff, soonest first. It
// stays small (bounded by the window), so insertion keeps it sorted. An
// item is one message, or a batch that is retried whole (batch.go).
type retryQueue struct {
	items []retryItem
	msgs  int // messages in items, batch members each
}

type retryItem struct {
	at    time.Time
	m     *spool.Message   // a message sent alone; nil for a batch
	batch []*spool.Message // a batch's members, in the order they are sent
}

func (r *retryQueue) len() int { return r.msgs }
func (r *retryQueue) add(at time.Time, m *spool.Message) {
	r.insert(retryItem{at: at, m: m})
}
func (r *retryQueue) addBatch(at time.Time, ms []*spool.Message) {
	r.insert(retryItem{at: at, batch: ms})
}
func (r *retryQueue) insert(it retryItem) {
	i := len(r.items)
	for i > 0 && r.items[i-1].at.After(it.at) {
		i--
	}
	r.items = append(r.items, retryItem{})
	copy(r.items[i+1:], r.items[i:])
	r.items[i] = it
	r.msgs += max(len(it.batch), 1)
}
func (r *retryQueue) peekAt() (time.Time, bool) {
	if len(r.items) == 0 {
		return time.Time{}, false
	}
	return r.items[0].at, true
}
func (r *retryQueue) peek() retryItem { return r.items[0] }
func (r *retryQueue) pop() {
	r.msgs -= max(len(r.items[0].batch), 1)
	r.items[0] = retryItem{}
	r.items = r.items[1:]
}

// unbatch replaces each batch with its members, each due when it was.
func (r *retryQueue) unbatch() {
	items := r.items
	r.items, r.msgs = nil, 0
	for _, it := range items {
		if it.batch == nil {
			r.insert(it)
			continue
		}
		for _, m := range it.batch {
			r.insert(retryItem{at: it.at, m: m})
		}
	}
}

// next returns what to send next: a retry that is due, else the head of
// the ready queue (where a held message waits first in line), alone or
// with the company it may take along (batch.go). When a batch waits for
// company, it returns nothing, and until is when it stops waiting (zero:
// when a load or an attempt finishes).
func (h *host) next(now time.Time) (p pick, fromRetry bool, until time.Time) {
	if at, ok := h.retry.peekAt(); ok && !at.After(now) {
		it := h.retry.peek()
		return pick{m: it.m, batch: it.batch}, true, time.Time{}
	}
	h.stage()
	m := h.ready.peek()
	if m == nil || h.pol.Batch == nil {
		return pick{m: m}, false, time.Time{}
	}
	return h.gather(m, now)
}

// take removes what next picked from h's queues and returns it as the
// request to send: a webhook alone, or a batch.
func (h *host) take(p pick, fromRetry bool) request {
	switch {
	case fromRetry:
		h.retry.pop()
	case p.idx != nil:
		p.batch = h.ready.takeAt(p.idx)
		for _, m := range p.batch {
			delete(h.fit, m)
		}
	default:
		h.ready.pop()
	}
	if p.batch == nil {
		return request{ms: []*spool.Message{p.m}}
	}
	h.extra += len(p.batch) - 1
	return request{ms: p.batch, batch: true}
}

package deliver

// The two per-host message queues: ready (FIFO, a 429'd message goes back
// to the front) and retry (ordered by when each message is due).

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
func (q *deque) pushFront(m *spool.Message) {
	if q.head > 0 {
		q.head--
		q.buf[q.head] = m
		return
	}
	q.buf = append([]*spool.Message{m}, q.buf...)
}

// retryQueue holds messages waiting for their backoff, soonest first. It
// stays small (bounded by the window), so insertion keeps it sorted.
type retryQueue struct{ items []retryItem }

type retryItem struct {
	at time.Time
	m  *spool.Message
}

func (r *retryQueue) len() int { return len(r.items) }
func (r *retryQueue) add(at time.Time, m *spool.Message) {
	i := len(r.items)
	for i > 0 && r.items[i-1].at.After(at) {
		i--
	}
	r.items = append(r.items, retryItem{})
	copy(r.items[i+1:], r.items[i:])
	r.items[i] = retryItem{at, m}
}
func (r *retryQueue) peekAt() (time.Time, bool) {
	if len(r.items) == 0 {
		return time.Time{}, false
	}
	return r.items[0].at, true
}
func (r *retryQueue) peek() *spool.Message { return r.items[0].m }
func (r *retryQueue) pop() {
	r.items[0] = retryItem{}
	r.items = r.items[1:]
}

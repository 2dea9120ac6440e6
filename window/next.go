package window

// What a host sends next, and what comes back: a retry that is due goes
// first, else what the lanes staged, alone or gathered into a batch
// (batch.go). What was sent and not delivered comes back through a verb
// that says why: held by a 429 (Hold), failed (RetryAt, RetryBatchAt),
// too large for the partner (Split), or unfit for its batch (Alone).
// max_age is judged at the head, here alone: what waited past it there
// is handed out to be buried (ExpireHead), and the host is woken when the
// head reaches it (Upkeep).

import (
	"slices"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// Pick is what Next chose to send; Take removes it from the Host.
type Pick struct {
	m     *spool.Message   // a webhook alone
	batch []*spool.Message // a batch retried whole
	idx   []int            // a batch gathered from the staged, at these positions
	retry bool             // the retry that was due
}

// Empty reports whether p is nothing to send.
func (p Pick) Empty() bool { return p.m == nil && p.batch == nil && p.idx == nil }

// Next returns what to send next: a retry that is due, else the head of
// the staged webhooks, alone or with the company it may take along.
// While a batch waits for company, it returns nothing, and until is when
// it stops waiting (zero: when a read or an attempt finishes). Next
// changes nothing but what is staged: the pick stays in h until Take.
func (h *Host) Next(now time.Time) (p Pick, until time.Time) {
	h.wake()
	if at, ok := h.retry.PeekAt(); ok && !at.After(now) {
		it := h.retry.Peek()
		return Pick{m: it.M, batch: it.Batch, retry: true}, time.Time{}
	}
	h.stage()
	m := h.ready.Peek()
	if m == nil || h.pol.Batch == nil {
		return Pick{m: m}, time.Time{}
	}
	return h.gather(m, now)
}

// Take removes p, as Next returned it, from h and returns the webhooks it
// sends; batch says whether they go as a batch (a batch retried whole
// does, however many members it kept).
func (h *Host) Take(p Pick) (ms []*spool.Message, batch bool) {
	h.wake()
	switch {
	case p.retry:
		h.retry.Pop()
	case p.idx != nil:
		p.batch = h.ready.TakeAt(p.idx)
		for _, m := range p.batch {
			delete(h.fits(), m)
		}
	default:
		h.ready.Pop()
	}
	if p.batch == nil {
		return []*spool.Message{p.m}, false
	}
	return p.batch, true
}

// Hold puts ms, sent and held back by the partner (a 429), first in line
// again in their order, to go when the hold ends; a 429 does not use up
// an attempt.
func (h *Host) Hold(ms []*spool.Message) {
	h.wake()
	for _, m := range slices.Backward(ms) {
		h.ready.PushFront(m)
	}
}

// Alone puts ms first in line again in their order, each to go alone: a
// batch found them unfit (their content changed).
func (h *Host) Alone(ms []*spool.Message) {
	h.wake()
	if h.fits() == nil && h.pol.Batch != nil {
		h.rareW().fit = make(map[*spool.Message]int, len(ms))
	}
	fit := h.fits()
	for _, m := range slices.Backward(ms) {
		h.ready.PushFront(m)
		if fit != nil {
			fit[m] = -1
		}
	}
}

// RetryAt queues m, which failed, to be sent again at at.
func (h *Host) RetryAt(at time.Time, m *spool.Message) {
	h.wake()
	h.retry.Add(at, m)
}

// RetryBatchAt queues ms, a batch that failed, to be sent again whole at
// at.
func (h *Host) RetryBatchAt(at time.Time, ms []*spool.Message) {
	h.wake()
	h.retry.AddBatch(at, ms)
}

// Split puts the two halves of ms, a batch the partner found too large,
// first in line, due at now, in their order: each goes as its own batch
// as soon as the host may send.
func (h *Host) Split(ms []*spool.Message, now time.Time) {
	h.wake()
	half := (len(ms) + 1) / 2
	h.retry.AddBatch(now, ms[:half])
	h.retry.AddBatch(now, ms[half:])
}

// ExpireHead removes and returns the webhook at the head (a retry alone
// that is due, else the first staged) when it is older than the policy's
// MaxAge: a webhook that waited behind a pause, a hold or a backlog is
// not sent late, it is buried. It returns nil when the head may go.
func (h *Host) ExpireHead(now time.Time) *spool.Message {
	h.wake()
	maxAge := h.pol.MaxAge
	if maxAge <= 0 {
		return nil
	}
	if at, ok := h.retry.PeekAt(); ok && !at.After(now) {
		if it := h.retry.Peek(); it.M != nil && now.Sub(it.M.Enqueued) > maxAge {
			h.retry.Pop()
			return it.M
		}
	}
	m := h.ready.Peek()
	if m == nil || now.Sub(m.Enqueued) <= maxAge {
		return nil
	}
	h.ready.Pop()
	delete(h.fits(), m)
	return m
}

// headExpiry is wake, or sooner when the first staged webhook reaches
// MaxAge first: it dies then even if nothing can be sent (a pause).
func (h *Host) headExpiry(wake time.Time) time.Time {
	m := h.ready.Peek()
	if m == nil || h.pol.MaxAge <= 0 {
		return wake
	}
	return earliest(wake, m.Enqueued.Add(h.pol.MaxAge+time.Millisecond))
}

// Due is how many requests h could send now if its gate allowed: what
// waits its turn, gathered Stage to a request, and the retries due.
func (h *Host) Due(now time.Time) int {
	h.wake()
	n := (h.Waiting() + h.pol.Stage - 1) / h.pol.Stage
	for _, it := range h.retry.items {
		if it.At.After(now) {
			break
		}
		n++
	}
	return n
}

// Retrying is how many webhooks wait for their backoff, a batch's
// members each.
func (h *Host) Retrying() int {
	if h.inMemory == nil {
		return 0
	}
	return h.retry.Len()
}

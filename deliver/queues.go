package deliver

// What a host sends next, from its window (package window): a retry that
// is due, else what its lanes staged, alone or gathered into a batch.

import (
	"time"

	"github.com/hookpace/hookpace/spool"
)

// next returns what to send next: a retry that is due, else the head of
// the staged webhooks (where a held message waits first in line), alone
// or with the company it may take along (batch.go). When a batch waits
// for company, it returns nothing, and until is when it stops waiting
// (zero: when a load or an attempt finishes).
func (h *host) next(now time.Time) (p pick, fromRetry bool, until time.Time) {
	if at, ok := h.win.Retry().PeekAt(); ok && !at.After(now) {
		it := h.win.Retry().Peek()
		return pick{m: it.M, batch: it.Batch}, true, time.Time{}
	}
	h.win.Stage()
	m := h.win.Ready().Peek()
	if m == nil || h.pol.Batch == nil {
		return pick{m: m}, false, time.Time{}
	}
	return h.gather(m, now)
}

// take removes what next picked from h's window and returns it as the
// request to send: a webhook alone, or a batch.
func (h *host) take(p pick, fromRetry bool) request {
	switch {
	case fromRetry:
		h.win.Retry().Pop()
	case p.idx != nil:
		p.batch = h.win.Ready().TakeAt(p.idx)
		for _, m := range p.batch {
			delete(h.fit, m)
		}
	default:
		h.win.Ready().Pop()
	}
	if p.batch == nil {
		return request{ms: []*spool.Message{p.m}}
	}
	h.extra += len(p.batch) - 1
	return request{ms: p.batch, batch: true}
}

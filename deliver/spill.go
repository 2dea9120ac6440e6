package deliver

// A host that can't send for a long while (its tokens refill at 1/h, a
// long hold, an open breaker) holds nothing in memory meanwhile (issue
// 36): what it held goes back to the spool, where it is anyway, and the
// host reads it again when its gate lets it send. With thousands of such
// hosts, one message each waiting for its retry and one loaded next
// would otherwise stay in memory for hours.

import (
	"time"

	"github.com/hookpace/hookpace/spool"
)

// spillAfter is how far ahead a host's next send must be for it to let
// go of what it holds: far enough that reading it again is no cost.
const spillAfter = 10 * time.Second

// blockedLong reports whether h's gate said it can't send before blocked,
// far enough ahead that h should hold nothing until then.
func (h *host) blockedLong(blocked, now time.Time) bool {
	return !blocked.IsZero() && blocked.Sub(now) > spillAfter && h.lanes == nil && !h.gate.Paused()
}

// spill lets go of every message h holds, if it is safe to read them
// again from the spool: nothing of h's is in flight or being read or
// purged, no batching, and every retry and every message's max_age falls
// after blocked (so waiting on disk changes neither when it is sent nor
// whether it dies). h's cursor goes back to just before the first of
// them, so the next load reads them again, in id order, a retry's
// attempts as its last Update recorded them. Updates and burials are
// written without waiting, but in order and within milliseconds, and the
// next load is at least spillAfter away; only a disk stalled for longer
// could let a load see a webhook just buried still queued and send it
// once more (at-least-once still holds).
func (d *Dispatcher) spill(h *host, blocked time.Time) {
	if h.gate.InFlight() > 0 || h.extra > 0 || h.loading || h.pol.Batch != nil || h.count() == 0 ||
		len(d.purges.loading[h.name]) > 0 {
		return
	}
	first := uint64(0)
	ok := true
	each := func(m *spool.Message) {
		if first == 0 || m.ID < first {
			first = m.ID
		}
		if h.pol.MaxAge > 0 && !m.Enqueued.Add(h.pol.MaxAge).After(blocked) {
			ok = false
		}
	}
	for i := range h.ready.len() {
		each(h.ready.at(i))
	}
	for _, it := range h.retry.items {
		if it.m == nil || it.at.After(blocked) {
			return
		}
		each(it.m)
	}
	if !ok {
		return
	}
	for h.ready.len() > 0 {
		d.release(h, h.ready.peek())
		h.ready.pop()
	}
	for _, it := range h.retry.items {
		d.release(h, it.m)
	}
	h.retry = retryQueue{}
	h.cursor, h.onDisk = first-1, true
	// Not read again before then (a minute at most, in case the gate
	// frees sooner by a way that does not clear it: a reload does).
	h.spilled = earliest(blocked, time.Now().Add(time.Minute))
}

// mayLoad reports whether h may read from the spool now: not while it
// has let go of its messages until its gate lets it send.
func (h *host) mayLoad(now time.Time) bool {
	return !now.Before(h.spilled)
}

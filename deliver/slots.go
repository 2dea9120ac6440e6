package deliver

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// The bound on attempts in flight over all hosts (delivery.max_in_flight).
//
// Each host's concurrency bounds what it has in flight, but not what all
// of them have together: after a restart with a backlog over 5,000 hosts,
// every host that had a token sent at once, 5,000 goroutines each with a
// connection and a grown stack, 270 MiB resident. With the
// bound, a host that finds every slot taken waits in a FIFO, and each slot
// that frees goes to the host at its head, one attempt at a time, so hosts
// take turns and none is passed over. A host that waits holds no token:
// it asks its gate only once it has a slot.

// DefaultMaxInFlight is the bound when Options.MaxInFlight is 0: a slow
// partner holds at most its own concurrency of it, and 512 attempts at
// ~60 KiB each (goroutine stack, connection, TLS buffers) fit a sidecar.
const DefaultMaxInFlight = 512

// slotWait is the FIFO of hosts waiting for a slot.
type slotWait struct {
	q    []*host
	head int
}

func (w *slotWait) len() int { return len(w.q) - w.head }

func (w *slotWait) push(h *host) {
	if w.head > 0 && w.head == len(w.q) {
		w.q, w.head = w.q[:0], 0
	}
	w.q = append(w.q, h)
}

func (w *slotWait) pop() *host {
	h := w.q[w.head]
	w.q[w.head] = nil
	w.head++
	return h
}

// haveSlot reports whether h may start an attempt now: a slot is free and
// no other host waits for one ahead of it (d.serving is the host a freed
// slot was handed to). If not, h joins the wait, once.
func (d *Dispatcher) haveSlot(h *host) bool {
	if d.inFlight < d.opts.MaxInFlight && (d.slotQ.len() == 0 || d.serving == h) {
		return true
	}
	if !h.slotWaiting {
		h.slotWaiting = true
		d.slotQ.push(h)
	}
	return false
}

// tookSlot records that h started an attempt. The host a freed slot was
// handed to takes one attempt on it; if it has more to send, it waits
// again behind the others.
func (d *Dispatcher) tookSlot(h *host) {
	d.inFlight++
	if d.serving == h {
		d.serving = nil
	}
}

// slotDone ends an attempt of h's: its slot is given back, h may start
// its next attempt (or joins the wait behind the hosts already in it),
// and the free slots go to the waiting hosts. Call it with d.mu held.
func (d *Dispatcher) slotDone(h *host) {
	d.inFlight--
	d.pump(h)
	d.serveWaiting()
}

// serveWaiting hands the free slots to the hosts waiting for one, in
// turn. A host that can't use its turn (no token, nothing ready) gives it
// to the next.
func (d *Dispatcher) serveWaiting() {
	for d.inFlight < d.opts.MaxInFlight && d.slotQ.len() > 0 && !d.stopping {
		h := d.slotQ.pop()
		h.slotWaiting = false
		if d.hosts[h.name] != h {
			continue // forgotten meanwhile
		}
		d.serving = h
		d.pump(h)
		d.serving = nil
	}
}

// Settling. A delivery answered 2xx gives its send slot (one of the
// host's concurrency and one of MaxInFlight) back as soon as the answer
// is read, and its delivery goroutine goes back to the pool: the delete
// is submitted to the queue and becomes durable in the writer's next
// round, and nothing waits for it but the webhook itself. Until its
// delete is settled the webhook stays out (counted in the host's window,
// its lane's out, never picked or read again by this process); once it
// is, land ends the delivery: the webhook leaves the window (the next of
// its ordering key may go), its metrics count and its log line is
// written. A failed delete ends it the same way: the writer logs why, and
// the webhook, still on disk, is sent again after a restart
// (at-least-once).
//
// The partner sees at most concurrency requests at once. What a crash
// can send twice is what h has sent and not deleted durably: its attempts
// in flight and its deliveries answered with their delete pending. h
// starts an attempt only while those are fewer than settleCap, twice its
// concurrency (with concurrency: auto, twice max_concurrency): a host at
// the cap waits for its deletes, and each delete that lands lets one more
// attempt start.

// settleCap is the most of h's requests sent and not deleted durably,
// in flight or answered: 2 × its concurrency (its ceiling with
// concurrency: auto).
func (h *host) settleCap() int { return 2 * max(h.pol.Limits.Concurrency, 1) }

// atSettleCap reports whether h must wait for its deletes before starting
// another attempt.
func (h *host) atSettleCap() bool { return h.sending+h.unsettled >= h.settleCap() }

// answered gives back the slot of an attempt of h answered 2xx, before
// its delete is submitted: the gate learns the answer (settle), what the
// partner said of its limits applies, and h may start its next attempt
// within its settle cap. It returns the hold the partner's stated quota
// put on h.
func (d *Dispatcher) answered(h *host, pol *Policy, res result, sentAt, now time.Time, lease string) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	h.unsettled++
	d.unsettled++
	d.settle(h, pol, res, sentAt, now, lease)
	quotaUntil := d.partnerLocked(h, pol, res.partner, vDone, now)
	d.slotDone(h)
	return quotaUntil
}

// landing is a delivery answered 2xx whose delete is submitted: what
// ending it takes once the delete is settled.
type landing struct {
	h          *host
	r          request
	pol        *Policy
	ctx        context.Context
	span       trace.Span
	res        result
	sentAt     time.Time
	lease      string
	quotaUntil time.Time  // the hold the partner's stated quota put on h
	who        attemptEnd // the attempt's identity, for its log line
}

// deleted is l's delete's callback, on the queue's writer goroutine: it
// queues l and, if none was queued, has land run on a delivery goroutine.
// One land ends every delivery a round made durable, under one lock.
func (d *Dispatcher) deleted(l *landing) {
	d.landMu.Lock()
	first := len(d.landed) == 0
	d.landed = append(d.landed, l)
	d.landMu.Unlock()
	if first {
		d.run(d.land)
	}
}

// land ends the deliveries whose deletes are settled: each webhook leaves
// its host's window, its host's settle count drops, and each host is
// pumped once. The delivery's wait group count ends here.
func (d *Dispatcher) land() {
	d.landMu.Lock()
	ls := d.landed
	d.landed = nil
	d.landMu.Unlock()
	ends := make([]attemptEnd, len(ls))
	d.mu.Lock()
	for i, l := range ls {
		e := d.finish(l.ctx, l.h, l.r, l.pol, l.res, l.sentAt, l.who.now, l.lease, true)
		e.res.quotaUntil = l.quotaUntil
		ends[i] = e.of(l.who)
		l.h.active = l.who.now.UnixNano()
		l.h.unsettled--
		l.h.landing = true
		d.unsettled--
	}
	for _, l := range ls {
		if l.h.landing {
			l.h.landing = false
			d.pump(l.h)
		}
	}
	d.mu.Unlock()
	for i, l := range ls {
		for _, m := range l.r.ms {
			d.end(m)
		}
		d.attemptEnded(l.span, ends[i])
		d.wg.Done()
	}
}

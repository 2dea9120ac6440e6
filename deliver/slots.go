package deliver

import "time"

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

// The settle budget: a delivery answered 2xx gives its send slot (the
// host's concurrency and one of MaxInFlight) back as soon as the answer
// is read, before its delete is durable, so that a slot turns over once
// per round trip and not once per round trip plus a group commit. The
// partner still sees at most concurrency requests at once. Until its
// delete is durable the webhook stays out (counted in the host's window,
// its lane's out, never picked or read again by this process); a host
// has at most settleBudget deliveries so answered and unsettled, and
// MaxInFlight bounds them over all hosts. A delivery answered while the
// budget is full keeps its slot until its delete is durable, as before.
// So a crash repeats, per host, at most concurrency deliveries in flight
// plus settleBudget answered: 2×concurrency (with concurrency: auto,
// 2×max_concurrency).

// settleBudget is how many of h's deliveries may be answered 2xx with
// their delete not yet durable, their slot given back: the host's
// concurrency (its ceiling with concurrency: auto).
func (h *host) settleBudget() int { return max(h.pol.Limits.Concurrency, 1) }

// answered gives back the slot of an attempt of r answered 2xx, if h's
// settle budget and the global one have room, before its delete is
// durable: the gate learns the answer (settle), what the partner said of
// its limits applies, and h may start its next attempt. It reports
// whether it did, with the hold the partner's stated quota put on h.
//
// The next webhook of an ordering key still waits for the delete to be
// durable (release, in finish): sent earlier, a crash could repeat both,
// and the partner would see the earlier one again after the later one.
func (d *Dispatcher) answered(h *host, pol *Policy, res result, sentAt, now time.Time, lease string) (bool, time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if h.unsettled >= h.settleBudget() || d.unsettled >= d.opts.MaxInFlight {
		return false, time.Time{}
	}
	h.unsettled++
	d.unsettled++
	d.settle(h, pol, res, sentAt, now, lease)
	quotaUntil := d.partnerLocked(h, pol, res.partner, vDone, now)
	d.slotDone(h)
	return true, quotaUntil
}

// settled ends the settle of one of h's deliveries that answered let go
// of its slot: its delete is durable (or failed) and finish has released
// its webhooks. h's window has room again. Call it with d.mu held.
func (d *Dispatcher) settled(h *host) {
	h.unsettled--
	d.unsettled--
	d.pump(h)
}

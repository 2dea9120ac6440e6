package window

// A host that can't send for a long while (its tokens refill at 1/h, a
// long hold, an open breaker) holds nothing in memory meanwhile: what it
// held goes back to the spool, where it is anyway, and the host reads it
// again when its gate lets it send. With thousands of such hosts, one
// message each waiting for its retry and one loaded next would otherwise
// stay in memory for hours. The policy is the same for every host, one
// lane or many: each lane it let go of is read again from before the
// first of its messages it held.

import (
	"time"

	"github.com/hookpace/hookpace/spool"
)

// SpillAfter is how far ahead a host's next send must be for it to let
// go of what it holds: far enough that reading it again is no cost.
const SpillAfter = 10 * time.Second

// spill lets go of every message h holds, if it is safe to read them
// again from the spool: nothing of h's is busy (in flight, or answered
// with its delete not durable yet), being read or purged, no batching,
// no webhook waits as an id (an ordering key's turn or a delay), and
// every retry and every message's max_age falls after
// blocked (so waiting on disk changes neither when it is sent nor whether
// it dies). Each lane's cursor goes back to just before the first of its
// messages let go of, so the next load reads them again, in id order, a
// retry's attempts as its last Update recorded them. Updates and burials
// are written without waiting, but in order and within milliseconds, and
// the next load is at least SpillAfter away; only a disk stalled for
// longer could let a load see a webhook just buried still queued and
// send it once more (at-least-once still holds).
func (h *Host) spill(now, blocked time.Time) {
	ls := &h.lanes
	if h.env.Busy() > 0 || h.loading || h.pol.Batch != nil || h.count() == 0 || ls.waiting() || ls.r().discovering {
		return
	}
	for _, it := range h.retry.items {
		if it.M == nil || it.At.After(blocked) {
			return
		}
	}
	// The keys come back in the order they would have gone: those with a
	// retry (due first), those with a pick staged (their turn was not
	// used), then the rotation's.
	var order []*unit
	seen := map[*unit]bool{}
	add := func(u *unit) {
		if !seen[u] {
			seen[u] = true
			order = append(order, u)
		}
	}
	var held []*spool.Message
	for _, it := range h.retry.items {
		held = append(held, it.M)
		if l := ls.outOf(it.M); l != nil {
			add(l.unit)
		}
	}
	for i := range h.ready.Len() {
		if l := ls.outOf(h.ready.At(i)); l != nil {
			add(l.unit)
		}
	}
	h.unstage() // back at the front of their lanes
	held = append(held, h.ready.buf[h.ready.head:]...)
	for _, u := range ls.ring.buf[ls.ring.head:] {
		add(u)
	}
	for l := range ls.all() {
		if l.q.Len() > 0 {
			add(l.unit) // a key let go of its turn (demote); those only on disk keep their place in the loads
		}
		for i := range l.q.Len() {
			held = append(held, l.q.At(i))
		}
	}
	first := map[spool.Lane]uint64{}
	for _, m := range held {
		if h.pol.MaxAge > 0 && !m.Enqueued.Add(h.pol.MaxAge).After(blocked) {
			return
		}
		if f, ok := first[m.Lane()]; !ok || m.ID < f {
			first[m.Lane()] = m.ID
		}
	}
	for _, m := range held {
		h.env.Unkeep(m)
		ls.takeOut(m)
	}
	h.ready = deque{}
	h.retry = retryQueue{}
	for l := range ls.all() {
		ls.mem -= l.q.Len()
		l.q = deque{}
	}
	// Read again in that order: the keys leave the rotation and rejoin it
	// as they are read.
	for ls.ring.len() > 0 {
		ls.ring.pop().inRing = false
	}
	waiting := ls.loadQ.buf[ls.loadQ.head:]
	ls.loadQ = fifo[*lane]{}
	for _, l := range waiting {
		l.inLoadQ = false
	}
	for _, u := range order {
		for _, l := range u.lanes {
			if l == nil || l.leaving {
				continue // a leaving lane is read from its start when taken up again (the bound, laneset.go)
			}
			f, ok := first[l.id]
			if ok {
				l.cursor = min(l.cursor, f-1)
			}
			if ok || l.onDisk {
				h.setOnDisk(l, true)
			}
		}
	}
	for _, l := range waiting {
		if l.onDisk && ls.get(l.id) == l {
			h.setOnDisk(l, true)
		}
	}
	for l := range ls.all() {
		h.forget(l)
	}
	// Not read again before then (a minute at most, in case the gate
	// frees sooner by a way that does not clear it: a reload does).
	h.setSpilled(earliest(blocked, now.Add(time.Minute)))
}

// mayLoad reports whether h may read from the spool now: not while it
// has let go of its messages until its gate lets it send.
func (h *Host) mayLoad(now time.Time) bool {
	return !now.Before(h.spilledUntil())
}

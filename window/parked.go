package window

// Webhooks that wait as ids, not in memory (laneset.go): those parked
// behind their ordering key's active webhook, and those delayed until
// their NotBefore. Each is read back from the spool when its time comes.

import (
	"container/heap"
	"errors"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// delayRef is a delayed webhook: its lane, its id and when it is due.
type delayRef struct {
	at   time.Time
	id   uint64
	lane *lane
}

// delayHeap orders delayed webhooks, soonest first.
type delayHeap []delayRef

func (q delayHeap) Len() int           { return len(q) }
func (q delayHeap) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q delayHeap) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *delayHeap) Push(x any)        { *q = append(*q, x.(delayRef)) }
func (q *delayHeap) Pop() any {
	old := *q
	r := old[len(old)-1]
	*q = old[:len(old)-1]
	return r
}

// readRef is a webhook to read back: its lane and id.
type readRef struct {
	lane *lane
	id   uint64
}

// orderDone moves m's ordering key on once m has left for good
// (delivered, dead or purged): the next parked webhook of the key
// becomes active and is read back.
func (h *Host) orderDone(m *spool.Message) {
	k := orderKey{m.Fairness, m.Ordering}
	if st := h.lanes.r().order[k]; st != nil && st.active == m.ID {
		h.orderNext(k, st)
	}
}

func (h *Host) orderNext(k orderKey, st *orderState) {
	ls := &h.lanes
	if len(st.parked) == 0 {
		delete(ls.r().order, k)
		return
	}
	st.active = st.parked[0]
	st.parked = st.parked[1:]
	// The parked ref becomes a read: the lane's refs count it until then.
	h.readBack([]readRef{{ls.get(st.lane), st.active}})
}

// dueDelayed reads back the delayed webhooks that are due, as many as h's
// window has room for, and returns when the next is due (zero: none).
func (h *Host) dueDelayed(now time.Time) time.Time {
	ls := &h.lanes
	x := ls.r() // popped only when it has some: ls.rare
	var refs []readRef
	for x.delayed.Len() > 0 && !x.delayed[0].at.After(now) && len(refs) < h.Room() {
		r := heap.Pop(&x.delayed).(delayRef)
		refs = append(refs, readRef{r.lane, r.id})
	}
	if len(refs) > 0 {
		h.readBack(refs)
	}
	if x.delayed.Len() > 0 && x.delayed[0].at.After(now) {
		return x.delayed[0].at
	}
	return time.Time{} // none, or due ones waiting for room: an attempt's end pumps h
}

// readBack reads refs from the spool, off the lock, and admits them. A
// webhook no longer queued (purged meanwhile) moves its ordering key on;
// one that can't be read now is tried again in a second.
func (h *Host) readBack(refs []readRef) {
	msgs := make([]*spool.Message, len(refs))
	errs := make([]error, len(refs))
	started := h.env.Read(func() func() {
		for i, r := range refs {
			msgs[i], errs[i] = h.sh.reader.Get(h.name, r.lane.id, r.id)
		}
		return func() { h.readBackDone(refs, msgs, errs) }
	})
	if started {
		x := h.lanes.w()
		x.reading += len(refs)
		if x.back == nil {
			x.back = map[uint64]bool{}
		}
		for _, r := range refs {
			x.back[r.id] = false
		}
	}
}

// readBackDone admits what readBack read.
func (h *Host) readBackDone(refs []readRef, msgs []*spool.Message, errs []error) {
	now := h.sh.now()
	x := h.lanes.w()
	x.reading -= len(refs)
	for i, r := range refs {
		r.lane.refs--
		taken := x.back[r.id]
		delete(x.back, r.id)
		switch err := errs[i]; {
		case taken:
			h.goneWhileParked(r)
		case err == nil && !h.env.Purged(msgs[i]):
			h.admit(r.lane, msgs[i], now)
		case err == nil || errors.Is(err, spool.ErrNotQueued):
			h.goneWhileParked(r)
		default:
			h.sh.log.Error("spool read failed", "host", h.name, "id", spool.IDString(r.id), "error", err)
			r.lane.refs++
			heap.Push(&x.delayed, delayRef{at: now.Add(time.Second), id: r.id, lane: r.lane})
		}
		h.forget(r.lane)
	}
}

// goneWhileParked handles a webhook that left the spool while it waited
// as an id: if it held its ordering key, the key moves on.
func (h *Host) goneWhileParked(r readRef) {
	for k, st := range h.lanes.r().order {
		if st.active == r.id && st.lane == r.lane.id {
			h.orderNext(k, st)
			return
		}
	}
}

// takeLaned removes from h's lanes the webhooks in want (a purge): those
// in memory go to out, and the ids of those waiting as ids are returned.
// An ordering key whose active webhook waited as an id moves on.
func (h *Host) takeLaned(want map[uint64]bool, out map[uint64]*spool.Message) map[uint64]bool {
	ls := &h.lanes
	x := ls.r() // written only where it has some: ls.rare
	refs := map[uint64]bool{}
	for id := range x.back {
		if want[id] {
			x.back[id] = true // its read, when done, finds it gone
			refs[id] = true
		}
	}
	for l := range ls.all() {
		var idx []int
		for i := range l.q.Len() {
			if want[l.q.At(i).ID] {
				idx = append(idx, i)
			}
		}
		if len(idx) > 0 {
			for _, m := range l.q.TakeAt(idx) {
				out[m.ID] = m
				ls.mem--
			}
		}
	}
	var gone []readRef
	if x.delayed.Len() > 0 {
		x.delayed, gone = takeDelayed(x.delayed, want, refs)
	}
	for _, st := range x.order {
		parked := st.parked[:0]
		for _, id := range st.parked {
			if want[id] {
				refs[id] = true
				ls.get(st.lane).refs--
			} else {
				parked = append(parked, id)
			}
		}
		st.parked = parked
	}
	for _, r := range gone {
		h.goneWhileParked(r)
		h.forget(r.lane)
	}
	return refs
}

// orderedDead reports loudly that a webhook of an ordering key became a
// dead letter: the key's next webhooks go on without it, which a
// receiver that relies on the order must know. Package events reports it
// too (message.dead with ordering_key).
func (h *Host) orderedDead(m *spool.Message, reason string) {
	if m.Ordering == "" {
		return
	}
	x := h.lanes.w()
	x.dead++
	x.lastDeadKey, x.lastDeadWhy = m.Ordering, reason
	h.sh.log.Warn("dead letter in an ordered key: the key's later webhooks go on without it", "host", h.name,
		"id", m.Ref().String(), "ordering_key", m.Ordering, "fairness_key", m.Fairness, "reason", reason)
}

// takeDelayed removes from q the webhooks in want, adding their ids to
// refs, and returns what is kept, still a heap, and those taken.
func takeDelayed(q delayHeap, want, refs map[uint64]bool) (delayHeap, []readRef) {
	kept := q[:0]
	var gone []readRef
	for _, r := range q {
		if !want[r.id] {
			kept = append(kept, r)
			continue
		}
		refs[r.id] = true
		r.lane.refs--
		gone = append(gone, readRef{r.lane, r.id})
	}
	clear(q[len(kept):])
	heap.Init(&kept)
	return kept, gone
}

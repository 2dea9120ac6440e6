package window

// Reading lanes from the spool (laneset.go): each lane from its own cursor,
// the lanes with the least in memory first, each within its part of the
// window, so that one key's backlog is never read to reach another's.
//
// The reads of the bound (see laneset.go): a key's lanes let go of when
// its turn ends while others wait on disk (demote), and the lanes the
// spool has that the host does not hold, taken up again (rediscover).

import (
	"container/heap"
	"slices"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// maxLaneReads is how many lanes one load reads.
const maxLaneReads = 64

type laneRead struct {
	l     *lane
	after uint64
	n     int
	msgs  []*spool.Message
	err   error
}

// enqueueLane takes a message the spool announced for a host in lanes.
func (h *Host) enqueueLane(m *spool.Message, now time.Time) {
	if usesLanes(m) {
		h.lanes.keyed = true
	}
	l := h.lanes.get(m.Lane())
	if l == nil && h.lanes.r().capped {
		// Its lane may have webhooks on disk from while there was no room
		// for it: take it up from its start (the bound, laneset.go).
		h.lastSeen = max(h.lastSeen, m.ID)
		if l = h.lane(m.Lane(), 0); l == nil {
			h.arrivedWithoutRoom(m.Lane())
			return
		}
		l.lastSeen = m.ID
		h.readSoon(l)
		return
	}
	if l == nil {
		l = h.lane(m.Lane(), h.lastSeen)
	}
	h.lastSeen = max(h.lastSeen, m.ID)
	if l == nil {
		h.arrivedWithoutRoom(m.Lane()) // no room for its lane: it waits on disk
		return
	}
	if m.ID <= l.cursor {
		return // already read from the spool
	}
	l.lastSeen = max(l.lastSeen, m.ID)
	if l.leaving {
		return // read from its start when taken up again (the bound, laneset.go)
	}
	room := h.count() < h.pol.Window && l.q.Len() < h.quota()
	if !room && !l.onDisk && l.q.Len() == 0 && h.count() >= h.pol.Window {
		room = h.makeRoom() // a key's first webhook waits one turn, not for a load
	}
	if !l.onDisk && room && h.env.Fits(m) {
		l.cursor = m.ID
		h.admit(l, m, now)
		return
	}
	if l.q.Len() == 0 {
		h.readSoon(l) // read at the next load, ahead of the lanes waiting for theirs
		return
	}
	h.setOnDisk(l, true)
}

// admit places m, just read from the spool, in h's lanes: in l's deque,
// parked behind its ordering key's active webhook, or delayed.
func (h *Host) admit(l *lane, m *spool.Message, now time.Time) {
	ls := &h.lanes
	if m.Ordering != "" {
		k := orderKey{m.Fairness, m.Ordering}
		x := ls.w()
		st := x.order[k]
		if st == nil {
			st = &orderState{lane: l.id, active: m.ID}
			if x.order == nil {
				x.order = map[orderKey]*orderState{}
			}
			x.order[k] = st
		}
		if st.active != m.ID {
			st.parked = append(st.parked, m.ID)
			l.refs++
			return
		}
	}
	if m.NotBefore.After(now) {
		heap.Push(&ls.w().delayed, delayRef{at: m.NotBefore, id: m.ID, lane: l})
		l.refs++
		return
	}
	l.q.Push(m)
	ls.mem++
	h.env.Keep(m)
	ls.hasWork(l.unit)
}

// roomScan bounds the lanes makeRoom looks at.
const roomScan = 64

// makeRoom lets go of the newest webhook of the fullest lane among the
// next keys in the rotation, so that a key's first webhook is held
// without going over the window. The webhook stays queued on disk and
// its lane is read again from before it. A lane with webhooks waiting as
// ids or being read keeps what it has (its cursor must not go back), and
// so does a lane with one webhook (its key keeps its turn).
func (h *Host) makeRoom() bool {
	ls := &h.lanes
	var big *lane
	for i, u := range ls.ring.buf[ls.ring.head:] {
		if i >= roomScan {
			break
		}
		for _, l := range u.lanes {
			if l != nil && l.refs == 0 && !l.loading && !l.leaving && l.q.Len() > 1 && (big == nil || l.q.Len() > big.q.Len()) {
				big = l
			}
		}
	}
	if big == nil {
		return false
	}
	m := big.q.popBack()
	ls.mem--
	h.env.Unkeep(m)
	big.cursor = m.ID - 1
	h.setOnDisk(big, true)
	return true
}

// resume marks h's queue as on disk, at a start: its default lane, and
// every other lane the spool has.
func (h *Host) resume() {
	h.setOnDisk(h.defaultLane(), true)
	for _, u := range h.sh.reader.Lanes(h.name) {
		if u.Lane == (spool.Lane{}) {
			continue
		}
		h.lanes.keyed = true
		l := h.lane(u.Lane, 0)
		if l == nil {
			h.untrack()
			break
		}
		h.setOnDisk(l, true)
	}
}

// loadLanes reads the lanes waiting for a load, off the lock.
func (h *Host) loadLanes() {
	ls := &h.lanes
	if h.loading || ls.loadQ.len() == 0 {
		return
	}
	budget := h.env.LoadSize()
	quota := h.quota()
	var jobs []laneRead
	for ls.loadQ.len() > 0 && budget > 0 && len(jobs) < maxLaneReads {
		l := ls.loadQ.pop()
		l.inLoadQ = false
		if l.leaving || ls.get(l.id) != l {
			continue // let go of (the bound, laneset.go)
		}
		if !l.onDisk || l.q.Len() >= quota {
			h.forget(l) // a full lane is queued again as pick drains it
			continue
		}
		n := min(quota-l.q.Len(), budget)
		l.loading = true
		jobs = append(jobs, laneRead{l: l, after: l.cursor, n: n})
		budget -= n
	}
	if len(jobs) == 0 {
		return
	}
	started := h.env.Read(func() func() {
		for i := range jobs {
			j := &jobs[i]
			j.msgs, j.err = h.sh.reader.ReadLane(h.name, j.l.id, j.after, j.n)
		}
		return func() {
			h.loading = false
			for _, j := range jobs {
				h.laneLoaded(j.l, j.msgs, j.n, j.err)
			}
		}
	})
	if !started {
		for _, j := range jobs {
			j.l.loading = false
			j.l.inLoadQ = true
			ls.loadQ.push(j.l)
		}
		return
	}
	h.loading = true
}

// laneLoaded admits what a read of l returned (n asked for).
func (h *Host) laneLoaded(l *lane, msgs []*spool.Message, n int, err error) {
	l.loading = false
	if l.leaving {
		h.forget(l) // what it read stays on disk, for when it is taken up again
		return
	}
	if err != nil {
		h.sh.log.Error("spool read failed", "host", h.name, "error", err)
		h.env.Wake(h.sh.now().Add(time.Second))
		l.inLoadQ = true // read again at the next load
		h.lanes.loadQ.push(l)
		return
	}
	now := h.sh.now()
	for _, m := range msgs {
		if usesLanes(m) {
			h.lanes.keyed = true
		}
		if m.ID > l.cursor && !h.env.Purged(m) {
			l.cursor = m.ID
			if !h.lanes.settledRecently(m.ID) {
				h.admit(l, m, now)
			}
		}
	}
	h.setOnDisk(l, len(msgs) == n || l.lastSeen > l.cursor)
	h.forget(l)
}

// demote lets go, while keys wait on disk without a lane, of the lanes
// of the keys whose turn just ended (pick), so that turns go round the
// whole key space, not only the lanes held: what such a lane held in
// memory stays queued on disk, and the lane is forgotten (at once, or
// once its webhooks out are gone for good) and read again from its start
// when its key's turn comes round (rediscover). A lane with webhooks
// parked or delayed stays, as it is.
func (h *Host) demote() {
	ls := &h.lanes
	x := ls.r()
	if len(x.demote) == 0 {
		return
	}
	for _, u := range x.demote {
		for _, l := range u.lanes {
			if l == nil || l.refs > 0 {
				continue
			}
			for l.q.Len() > 0 {
				h.env.Unkeep(l.q.Peek())
				l.q.Pop()
				ls.mem--
			}
			l.leaving = true
			x.untracked = true
			h.forget(l)
		}
		if u.choose0() != nil {
			ls.hasWork(u) // a lane that stays
		}
	}
	clear(x.demote)
	x.demote = x.demote[:0]
}

// rediscover takes up, when h has room again, the lanes with webhooks on
// disk that it does not hold, off the lock: in the order of their keys,
// going on from where it stopped last time, so that each key's turn
// comes round.
func (h *Host) rediscover() {
	ls := &h.lanes
	x := ls.r()
	if !x.untracked || x.discovering || ls.count() > h.pol.MaxLanes*3/4 {
		return
	}
	// Cleared before the read: a lane let go of or announced without
	// room while it runs sets it again, for the next rediscover.
	x.untracked = false // x is ls.rare: noRare is never untracked
	var lanes []spool.LaneUsage
	x.discovering = h.env.Read(func() func() {
		lanes = h.sh.reader.Lanes(h.name)
		return func() { h.rediscovered(lanes) }
	})
	if !x.discovering {
		x.untracked = true
	}
}

// rediscovered takes up the lanes of lanes that h does not hold, going
// on from where it stopped last time, as far as there is room.
func (h *Host) rediscovered(lanes []spool.LaneUsage) {
	ls := &h.lanes
	x := ls.w()
	x.discovering = false
	start, found := slices.BinarySearchFunc(lanes, x.resumeAt, func(u spool.LaneUsage, at spool.Lane) int {
		return compareLanes(u.Lane, at)
	})
	if found {
		start++ // the last one taken up: the next after it
	}
	for i := range lanes {
		u := lanes[(start+i)%len(lanes)]
		if ls.get(u.Lane) != nil {
			continue
		}
		l := h.lane(u.Lane, 0)
		if l == nil {
			x.untracked = true // more than there is room for: again later
			break
		}
		h.setOnDisk(l, true)
		x.resumeAt = u.Lane
	}
}

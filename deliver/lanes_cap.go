package deliver

// The bound for many keys: a host keeps at most maxLanes lanes
// in memory. A lane that has nothing left in memory, on its way or
// waiting as an id is forgotten; a webhook announced for a lane the host
// has no room for stays on disk, and once lanes have been forgotten the
// host asks the spool which lanes have webhooks and takes up those it
// does not hold, reading each from its start.
//
// Reading a lane from its start is safe because a lane is never forgotten
// while any of its webhooks is out (picked: staged, in flight, retrying
// or held): what is left of it on disk is what was never read, or what
// has just left for good but whose removal may not be written yet (a
// burial or a purge is written without waiting). Those last are
// remembered, by id, in a ring of the latest ones (settled), and skipped.

import (
	"cmp"
	"slices"
	"strings"

	"github.com/hookpace/hookpace/spool"
)

// maxLanes bounds the lanes a host keeps in memory (a var for tests).
var maxLanes = 4096

// settledKept is how many of the latest webhooks to leave a host in
// lanes for good are remembered, while it is near maxLanes: far more
// than the writer has pending at once.
const settledKept = 4096

// out counts m, picked from lane l, as on its way.
func (ls *laneSet) setOut(m *spool.Message, l *lane) {
	if ls.outs == nil {
		ls.outs = map[uint64]*lane{}
	}
	ls.outs[m.ID] = l
	l.out++
}

// settle notes that m left h for good (release): its lane no longer
// counts it as out, and while h is near its bound, its id is remembered.
func (h *host) settle(m *spool.Message) {
	ls := h.lanes
	if l := ls.outs[m.ID]; l != nil {
		delete(ls.outs, m.ID)
		l.out--
		h.forget(l)
	}
	if ls.count() >= maxLanes/2 || ls.capped {
		if len(ls.settled) < settledKept {
			ls.settled = append(ls.settled, m.ID)
		} else {
			ls.settled[ls.settledAt] = m.ID
			ls.settledAt = (ls.settledAt + 1) % settledKept
		}
	}
}

// settledRecently reports whether id left h for good lately.
func (ls *laneSet) settledRecently(id uint64) bool {
	return len(ls.settled) > 0 && slices.Contains(ls.settled, id)
}

// arrivedKept bounds the lanes remembered as having had a webhook
// announced while there was no room for them.
const arrivedKept = 1024

// untrack notes that a webhook waits on disk in a lane h has no room
// for. From then on, a lane h takes up is read from its start.
func (h *host) untrack() { h.lanes.untracked, h.lanes.capped = true, true }

// arrivedWithoutRoom remembers that a webhook was announced for lane id
// while h had no room for it: it is taken up first when room is made
// (takeArrived), so a new key waits for a lane to free, not for the turn
// of the whole key space.
func (h *host) arrivedWithoutRoom(id spool.Lane) {
	h.untrack()
	if ls := h.lanes; ls.arrived.len() < arrivedKept {
		ls.arrived.push(id)
	}
}

// takeArrived takes up the lanes that had webhooks announced while there
// was no room, as room is made, from their start.
func (h *host) takeArrived() {
	ls := h.lanes
	for ls.arrived.len() > 0 && ls.count() < maxLanes {
		id := ls.arrived.pop()
		if ls.get(id) == nil {
			h.readSoon(h.lane(id, 0))
		}
	}
}

// readSoon marks l, just taken up for a webhook announced for it, as on
// disk and reads it at the next load, ahead of the lanes waiting for
// theirs: a new key's first webhook does not wait for the loads of
// thousands of lanes.
func (h *host) readSoon(l *lane) {
	if !l.inLoadQ && !l.loading {
		l.inLoadQ = true
		h.lanes.loadQ.pushFront(l)
	}
	h.setOnDisk(l, true)
}

// demote lets go, while keys wait on disk without a lane, of the lanes
// of the keys whose turn just ended (pick), so that turns go round the
// whole key space, not only the lanes held: what such a lane held in
// memory stays queued on disk, and the lane is forgotten (at once, or
// once its webhooks out are gone for good) and read again from its start
// when its key's turn comes round (rediscover). A lane with webhooks
// parked or delayed stays, as it is.
func (d *Dispatcher) demote(h *host) {
	ls := h.lanes
	for _, u := range ls.demote {
		for _, l := range u.lanes {
			if l == nil || l.refs > 0 {
				continue
			}
			for l.q.len() > 0 {
				d.unkeep(h, l.q.peek())
				l.q.pop()
				ls.mem--
			}
			l.leaving = true
			ls.untracked = true
			h.forget(l)
		}
		if u.choose0() != nil {
			ls.hasWork(u) // a lane that stays
		}
	}
	clear(ls.demote)
	ls.demote = ls.demote[:0]
}

// rediscover takes up, when h has room again, the lanes with webhooks on
// disk that it does not hold, off the lock: in the order of their keys,
// going on from where it stopped last time, so that each key's turn
// comes round.
func (d *Dispatcher) rediscover(h *host) {
	ls := h.lanes
	if !ls.untracked || ls.discovering || ls.count() > maxLanes*3/4 || d.stopping {
		return
	}
	ls.discovering = true
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		lanes := d.opts.Reader.Lanes(h.name)
		d.mu.Lock()
		defer d.mu.Unlock()
		ls.discovering = false
		ls.untracked = false
		start, found := slices.BinarySearchFunc(lanes, ls.resumeAt, func(u spool.LaneUsage, at spool.Lane) int {
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
				ls.untracked = true // more than there is room for: again later
				break
			}
			h.setOnDisk(l, true)
			ls.resumeAt = u.Lane
		}
		d.pump(h)
	}()
}

// compareLanes orders lanes as the spool lists them: by key, then
// priority rank.
func compareLanes(a, b spool.Lane) int {
	return cmp.Or(strings.Compare(a.Key, b.Key), a.Priority.Rank()-b.Priority.Rank())
}

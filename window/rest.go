package window

// A plain host at rest: once a host with one lane (no fairness key,
// priority, ordering key or delay ever seen) holds nothing, has nothing
// out and has read all that was announced, its default lane and fairness
// unit are as a new Host's but for where reading starts, which is
// h.lastSeen. Rest drops them; the first use of the lanes makes them
// again (wake), reading after h.lastSeen as before.

// Rest drops h's default lane and fairness unit if h is a plain host
// with nothing in memory, out or unread, and reports whether h is at
// rest. A Host at rest answers every method as it would have before.
func (h *Host) Rest() bool {
	if h.lanes.def == nil {
		return true
	}
	if !h.Settled() || h.env.Busy() != 0 {
		return false
	}
	h.compact()
	ls := &h.lanes
	l, u := ls.def, ls.def.unit
	if ls.keyed || ls.lanes != nil || ls.units != nil || ls.outs != nil || ls.rare != nil ||
		ls.mem != 0 || ls.onDisk != 0 || ls.ring.len() != 0 || ls.loadQ.len() != 0 || h.rare != nil ||
		l.q.Len() != 0 || l.onDisk || l.loading || l.inLoadQ || l.refs != 0 || l.out != 0 || l.leaving ||
		l.cursor != h.lastSeen || l.lastSeen != h.lastSeen ||
		u.inRing || u.deficit != [3]int{} || u.weight != max(h.pol.Weights[""], 1) {
		return false
	}
	h.lanes = laneSet{}
	h.ready, h.retry = deque{}, retryQueue{}
	return true
}

// wake makes h's default lane and unit again if h is at rest: what a
// Host's methods do first wherever they may use its lanes.
func (h *Host) wake() {
	if h.lanes.def != nil {
		return
	}
	h.newLanes()
	h.lanes.def.cursor, h.lanes.def.lastSeen = h.lastSeen, h.lastSeen
}

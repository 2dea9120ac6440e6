package window

// A plain host at rest: once a host with one lane (no fairness key,
// priority, ordering key or delay ever seen) holds nothing, has nothing
// out and has read all that was announced, what it holds in memory is as
// a new Host's but for where reading starts, which is h.lastSeen. Rest
// drops it (inMemory: the queues, the lane set, the default lane and its
// fairness unit); the first use makes it again (wake), reading after
// h.lastSeen as before. The methods that only read answer for a Host at
// rest as for a new one.

// Rest drops what h holds in memory if h is a plain host with nothing in
// memory, out or unread, and reports whether h is at rest. A Host at
// rest answers every method as it would have before.
func (h *Host) Rest() bool {
	if h.inMemory == nil {
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
		h.ready.Len() != 0 || h.retry.Len() != 0 || h.onDisk || h.loading ||
		l.q.Len() != 0 || l.onDisk || l.loading || l.inLoadQ || l.refs != 0 || l.out != 0 || l.leaving ||
		l.cursor != h.lastSeen || l.lastSeen != h.lastSeen ||
		u.inRing || u.deficit != [3]int{} || u.weight != max(h.pol.Weights[""], 1) {
		return false
	}
	h.inMemory = nil
	return true
}

// wake makes what h holds in memory again if h is at rest: what a Host's
// methods do first wherever they may change it.
func (h *Host) wake() {
	if h.inMemory != nil {
		return
	}
	h.inMemory = &inMemory{}
	h.newLanes()
	h.lanes.def.cursor, h.lanes.def.lastSeen = h.lastSeen, h.lastSeen
}

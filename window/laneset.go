package window

// A host's lane set: what of its queue is in memory, in lanes, and how
// it takes turns between them.
//
// Fair and ordered delivery within a host: A host keeps its messages in
// lanes (spool.Lane: a fairness key and a priority), each read from the
// spool on its own; a host whose webhooks carry no key, priority,
// ordering key or delay is a lane set of one lane, the default one. It
// serves the fairness keys in turn:
//
//   - Keys take turns round-robin, a key with weight w taking w messages
//     a turn. A key that gets work joins the end of the rotation, so its
//     first webhook waits for at most one turn of each other key.
//   - Within a key, higher priority goes first, but each lower priority
//     with work gets at least Policy.MinShare of the key's turns.
//   - Of the webhooks with one ordering key, one at a time is active: in
//     a lane, sent, retrying or held. The others are parked as ids, not in
//     memory, and the next is read from the spool once the active one was
//     delivered or became a dead letter.
//   - A webhook whose NotBefore is still ahead waits as an id in a heap
//     until then, without holding back the webhooks behind it.
//
// What the lanes pick goes to h.ready, a short stage (one request's
// worth), from which pump, batching, holds and max_age work.
//
// The bound for many keys: a host keeps at most h.pol.MaxLanes lanes
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
	"iter"
	"math"
	"slices"
	"strings"

	"github.com/hookpace/hookpace/spool"
)

// laneSet is a host's lanes and what it remembers of ordering keys and
// delays.
type laneSet struct {
	// def is the default lane (no key, normal priority), which every host
	// has; the other lanes and the fairness keys but "" are in the maps,
	// made on a host's first keyed webhook, so that a plain host carries
	// none.
	def   *lane
	lanes map[spool.Lane]*lane
	units map[string]*unit // by fairness key, but ""
	ring  fifo[*unit]      // the keys with messages in memory, in turn order
	mem   int              // messages in the lanes' deques

	loadQ fifo[*lane] // lanes with more on disk, waiting for a load

	onDisk int // lanes with onDisk set

	keyed bool // a webhook with a key, priority, ordering key or delay was seen (status)

	// outs is the lane of each message on its way.
	outs map[uint64]*lane

	// rare is what only hosts with ordering keys, delays or more keys
	// than the bound need: nil until the first of those (w), read
	// through r, which gives the zero value while there is none.
	rare *laneRare
}

// laneRare is the part of a laneSet most hosts never use.
type laneRare struct {
	order   map[orderKey]*orderState
	delayed delayHeap
	reading int // parked or delayed messages being read back
	// back are the ids being read back, true once a purge took them: a
	// read that brings one in treats it as gone.
	back map[uint64]bool

	// Dead letters of ordering keys (orderedDead).
	dead                     int64
	lastDeadKey, lastDeadWhy string

	// The bound on lanes (the bound): whether webhooks wait in lanes not
	// held, and the latest webhooks to leave for good.
	demote      []*unit          // keys whose turn ended while others waited on disk
	arrived     fifo[spool.Lane] // lanes announced while there was no room (the bound)
	resumeAt    spool.Lane       // where in the keys rediscover goes on from
	untracked   bool             // webhooks wait in lanes not held
	capped      bool             // the bound was reached once: a lane taken up is read from its start
	discovering bool
	settled     []uint64
	settledAt   int
}

// noRare is what laneSet.r gives a set without a laneRare: never written.
var noRare laneRare

// r is ls's rare part, to read.
func (ls *laneSet) r() *laneRare {
	if ls.rare == nil {
		return &noRare
	}
	return ls.rare
}

// w is ls's rare part, to write: made on first use.
func (ls *laneSet) w() *laneRare {
	if ls.rare == nil {
		ls.rare = new(laneRare)
	}
	return ls.rare
}

// idle reports whether x holds nothing a host must keep: it may be
// dropped.
func (x *laneRare) idle() bool {
	return len(x.order) == 0 && x.delayed.Len() == 0 && x.reading == 0 && len(x.back) == 0 &&
		x.dead == 0 && len(x.demote) == 0 && x.arrived.len() == 0 && x.resumeAt == (spool.Lane{}) &&
		!x.untracked && !x.capped && !x.discovering && len(x.settled) == 0
}

// lane is one lane of a host: its messages in memory, and where reading
// it from the spool has got to.
type lane struct {
	id       spool.Lane
	unit     *unit
	q        deque
	cursor   uint64 // highest id of the lane read from the spool
	lastSeen uint64 // highest id of the lane announced by the spool
	onDisk   bool   // the spool holds messages of the lane above cursor
	loading  bool
	inLoadQ  bool
	refs     int  // parked, delayed or being read back
	out      int  // picked and not yet gone for good (the bound)
	leaving  bool // let go of to make room (demote): forgotten once nothing of it is out
}

// unit is one fairness key: its lanes by priority rank, and its turn.
type unit struct {
	key     string
	weight  int
	lanes   [3]*lane
	credit  int    // messages left in the current turn
	deficit [3]int // the lower priorities' share owed, in millionths of a pick (choose)
	inRing  bool
}

type orderKey struct{ fairness, ordering string }

// orderState is one ordering key with webhooks in the dispatcher: the id
// of its active webhook and, in order, the ids parked behind it.
type orderState struct {
	lane   spool.Lane
	active uint64
	parked []uint64
}

// defaultMaxLanes bounds the lanes a host keeps in memory (Policy.MaxLanes).
const defaultMaxLanes = 4096

// settledKept is how many of the latest webhooks to leave a host in
// lanes for good are remembered, while it is near Policy.MaxLanes: far more
// than the writer has pending at once.
const settledKept = 4096

// arrivedKept bounds the lanes remembered as having had a webhook
// announced while there was no room for them.
const arrivedKept = 1024

// usesLanes reports whether m uses more than the default lane: a fairness
// key, a priority, an ordering key or a delay.
func usesLanes(m *spool.Message) bool {
	return m.Fairness != "" || m.Priority != spool.PriorityNormal || m.Ordering != "" || !m.NotBefore.IsZero()
}

// newLanes gives h its lane set: the default lane, read from the start.
func (h *Host) newLanes() {
	u := &unit{weight: max(h.pol.Weights[""], 1)}
	l := &lane{unit: u}
	u.lanes[l.id.Priority.Rank()] = l
	h.lanes = laneSet{def: l}
}

// defaultLane is h's lane of webhooks without a key or priority; it is
// never forgotten.
func (h *Host) defaultLane() *lane { return h.lanes.def }

// waiting reports whether webhooks wait as ids (parked or delayed) or are
// being read back.
func (ls *laneSet) waiting() bool {
	x := ls.r()
	return len(x.order) > 0 || x.delayed.Len() > 0 || x.reading > 0
}

// reweigh applies reloaded fairness weights.
func (ls *laneSet) reweigh(w map[string]int) {
	ls.def.unit.weight = max(w[""], 1)
	for k, u := range ls.units {
		u.weight = max(w[k], 1)
	}
}

// get is lane id, nil if the host holds none.
func (ls *laneSet) get(id spool.Lane) *lane {
	if id == (spool.Lane{}) {
		return ls.def
	}
	return ls.lanes[id]
}

// count is how many lanes the host holds, the default one included.
func (ls *laneSet) count() int { return len(ls.lanes) + 1 }

// all yields every lane the host holds, the default one first.
func (ls *laneSet) all() iter.Seq[*lane] {
	return func(yield func(*lane) bool) {
		if !yield(ls.def) {
			return
		}
		for _, l := range ls.lanes {
			if !yield(l) {
				return
			}
		}
	}
}

// unit is fairness key key's, nil if the host holds no lane of it.
func (ls *laneSet) unit(key string) *unit {
	if key == "" {
		return ls.def.unit
	}
	return ls.units[key]
}

// hasWork puts u in the rotation, at its end, if it is not in it.
func (ls *laneSet) hasWork(u *unit) {
	if !u.inRing {
		u.inRing, u.credit = true, u.weight
		ls.ring.push(u)
	}
}

// setOut counts m, picked from lane l, as on its way. The default lane
// is never forgotten, so nothing out of it is counted: a plain host
// carries no map of what is out.
func (ls *laneSet) setOut(m *spool.Message, l *lane) {
	if l == ls.def {
		return
	}
	if ls.outs == nil {
		ls.outs = map[uint64]*lane{}
	}
	ls.outs[m.ID] = l
	l.out++
}

// outOf is the lane m was picked from while m is on its way: the one
// setOut counted, or the default lane for a webhook of it.
func (ls *laneSet) outOf(m *spool.Message) *lane {
	if l := ls.outs[m.ID]; l != nil {
		return l
	}
	if m.Lane() == (spool.Lane{}) {
		return ls.def
	}
	return nil
}

// takeOut counts m as no longer on its way and returns its lane (outOf).
func (ls *laneSet) takeOut(m *spool.Message) *lane {
	l := ls.outOf(m)
	if l != nil && l != ls.def {
		delete(ls.outs, m.ID)
		l.out--
	}
	return l
}

// settledRecently reports whether id left h for good lately.
func (ls *laneSet) settledRecently(id uint64) bool {
	return slices.Contains(ls.r().settled, id)
}

// lane returns h's lane id, made with the given cursor if h has none;
// nil if h holds Policy.MaxLanes lanes already (the bound).
func (h *Host) lane(id spool.Lane, cursor uint64) *lane {
	ls := &h.lanes
	if l := ls.get(id); l != nil {
		return l
	}
	if ls.count() >= h.pol.MaxLanes {
		return nil
	}
	u := ls.unit(id.Key)
	if u == nil {
		u = &unit{key: id.Key, weight: max(h.pol.Weights[id.Key], 1)}
		if ls.units == nil {
			ls.units = map[string]*unit{}
		}
		ls.units[id.Key] = u
	}
	l := &lane{id: id, unit: u, cursor: cursor, lastSeen: cursor}
	u.lanes[id.Priority.Rank()] = l
	if ls.lanes == nil {
		ls.lanes = map[spool.Lane]*lane{}
	}
	ls.lanes[id] = l
	return l
}

// setOnDisk records whether the spool holds more of l than h has read,
// and asks for a load when it does.
func (h *Host) setOnDisk(l *lane, on bool) {
	if l.onDisk != on {
		l.onDisk = on
		if on {
			h.lanes.onDisk++
		} else {
			h.lanes.onDisk--
		}
	}
	h.onDisk = h.lanes.onDisk > 0
	if on && !l.inLoadQ && !l.loading {
		l.inLoadQ = true
		h.lanes.loadQ.push(l)
	}
}

// forget drops l when nothing of it is left in memory or on disk. A lane
// made again later starts from the highest id announced then: everything
// of it up to there has been read.
func (h *Host) forget(l *lane) {
	busy := l.loading || l.refs > 0 || l.out > 0 || l.id == (spool.Lane{})
	if busy || !l.leaving && (l.q.Len() > 0 || l.onDisk || l.inLoadQ) {
		return
	}
	ls := &h.lanes
	if l.onDisk {
		ls.onDisk--
		h.onDisk = ls.onDisk > 0
	}
	if l.leaving {
		ls.w().untracked = true // what it let go of waits on disk: rediscover takes it up
	}
	delete(ls.lanes, l.id)
	u := l.unit
	u.lanes[l.id.Priority.Rank()] = nil
	if u.lanes == [3]*lane{} && !u.inRing { // never the default lane's
		delete(ls.units, u.key)
	}
}

// quota is how many messages one lane may hold in memory: an equal part
// of the window, at least one.
func (h *Host) quota() int {
	return max(h.pol.Window/h.lanes.count(), 1)
}

// stage moves what the lanes pick next into h.ready, up to one request's
// worth.
func (h *Host) stage() {
	for h.ready.Len() < h.pol.Stage {
		m := h.pick()
		if m == nil {
			return
		}
		h.ready.Push(m)
	}
}

// unstage puts what h.ready holds back at the front of its lanes, in
// its order: picked while h could not send (a pause), it is picked again
// with whatever came since, a higher priority first. What has no lane to
// go back to stays staged.
func (h *Host) unstage() {
	ls := &h.lanes
	if h.ready.Len() == 0 {
		return
	}
	var keep []*spool.Message
	back := make([]*spool.Message, 0, h.ready.Len())
	for h.ready.Len() > 0 {
		back = append(back, h.ready.Peek())
		h.ready.Pop()
	}
	for i := len(back) - 1; i >= 0; i-- {
		m := back[i]
		l := ls.outOf(m)
		if l == nil || l.leaving || ls.get(l.id) != l {
			keep = append(keep, m)
			continue
		}
		ls.takeOut(m)
		l.q.PushFront(m)
		ls.mem++
		ls.hasWork(l.unit)
	}
	for _, m := range keep { // in reverse: each goes to the front
		h.ready.PushFront(m)
	}
}

// pick takes the next message from the lanes: the key whose turn it is,
// the priority its share says.
func (h *Host) pick() *spool.Message {
	ls := &h.lanes
	for ls.ring.len() > 0 {
		u := ls.ring.peek()
		l := u.choose(h.pol.MinShare)
		if l == nil { // nothing of u's in memory any more
			ls.ring.pop()
			u.inRing = false
			h.forgetUnit(u)
			continue
		}
		m := l.q.Peek()
		l.q.Pop()
		ls.mem--
		ls.setOut(m, l)
		if l.onDisk && !l.inLoadQ && !l.loading && l.q.Len() <= h.quota()/2 {
			l.inLoadQ = true
			ls.loadQ.push(l)
		}
		if u.credit--; u.credit <= 0 || u.choose0() == nil {
			ls.ring.pop()
			u.inRing = false
			switch {
			case ls.r().untracked && u.key != "":
				x := ls.w()
				x.demote = append(x.demote, u) // makes room for keys waiting on disk (the bound)
			case u.choose0() != nil:
				ls.hasWork(u) // its next turn, at the end
			}
		}
		h.forgetUnit(u)
		return m
	}
	return nil
}

// forgetUnit forgets u's lanes that have nothing left (forget).
func (h *Host) forgetUnit(u *unit) {
	for _, l := range u.lanes {
		if l != nil {
			h.forget(l)
		}
	}
}

// settle notes that m left h for good (release): its lane no longer
// counts it as out, and while h is near its bound, its id is remembered.
func (h *Host) settle(m *spool.Message) {
	ls := &h.lanes
	if l := ls.takeOut(m); l != nil {
		h.forget(l)
	}
	if ls.count() >= h.pol.MaxLanes/2 || ls.r().capped {
		x := ls.w()
		if len(x.settled) < settledKept {
			x.settled = append(x.settled, m.ID)
		} else {
			x.settled[x.settledAt] = m.ID
			x.settledAt = (x.settledAt + 1) % settledKept
		}
	}
}

// untrack notes that a webhook waits on disk in a lane h has no room
// for. From then on, a lane h takes up is read from its start.
func (h *Host) untrack() {
	x := h.lanes.w()
	x.untracked, x.capped = true, true
}

// arrivedWithoutRoom remembers that a webhook was announced for lane id
// while h had no room for it: it is taken up first when room is made
// (takeArrived), so a new key waits for a lane to free, not for the turn
// of the whole key space.
func (h *Host) arrivedWithoutRoom(id spool.Lane) {
	h.untrack()
	if x := h.lanes.w(); x.arrived.len() < arrivedKept {
		x.arrived.push(id)
	}
}

// takeArrived takes up the lanes that had webhooks announced while there
// was no room, as room is made, from their start.
func (h *Host) takeArrived() {
	ls := &h.lanes
	for x := ls.r(); x.arrived.len() > 0 && ls.count() < h.pol.MaxLanes; {
		id := x.arrived.pop() // x is ls.rare: noRare has none
		if ls.get(id) == nil {
			h.readSoon(h.lane(id, 0))
		}
	}
}

// readSoon marks l, just taken up for a webhook announced for it, as on
// disk and reads it at the next load, ahead of the lanes waiting for
// theirs: a new key's first webhook does not wait for the loads of
// thousands of lanes.
func (h *Host) readSoon(l *lane) {
	if !l.inLoadQ && !l.loading {
		l.inLoadQ = true
		h.lanes.loadQ.pushFront(l)
	}
	h.setOnDisk(l, true)
}

// choose0 is the highest-priority lane of u with messages in memory.
func (u *unit) choose0() *lane {
	for _, l := range u.lanes {
		if l != nil && l.q.Len() > 0 {
			return l
		}
	}
	return nil
}

// pickUnit is a whole pick in choose's accounting.
const pickUnit = 1_000_000

// choose is the lane u sends from next: its highest priority with
// messages in memory, unless a lower one with messages is owed its
// share: each pick owes each lower priority with work minShare of a
// pick, and one owed a whole pick gets it.
func (u *unit) choose(minShare float64) *lane {
	if minShare <= 0 {
		minShare = 0.1
	}
	// In millionths, so that ten shares of 0.1 make a whole pick.
	share := int(math.Round(minShare * pickUnit))
	top := -1
	owed := -1
	for r, l := range u.lanes {
		if l == nil || l.q.Len() == 0 {
			u.deficit[r] = 0 // no credit is banked while there is no work
			continue
		}
		if top < 0 {
			top = r
			continue
		}
		u.deficit[r] += share
		if u.deficit[r] >= pickUnit && (owed < 0 || u.deficit[r] > u.deficit[owed]) {
			owed = r
		}
	}
	switch {
	case top < 0:
		return nil
	case owed >= 0:
		u.deficit[owed] -= pickUnit
		return u.lanes[owed]
	}
	return u.lanes[top]
}

// compareLanes orders lanes as the spool lists them: by key, then
// priority rank.
func compareLanes(a, b spool.Lane) int {
	return cmp.Or(strings.Compare(a.Key, b.Key), a.Priority.Rank()-b.Priority.Rank())
}

package deliver

// Reading lanes from the spool (lanes.go): each lane from its own cursor,
// the lanes with the least in memory first, each within its part of the
// window, so that one key's backlog is never read to reach another's.

import (
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
func (d *Dispatcher) enqueueLane(h *host, m *spool.Message, now time.Time) {
	if usesLanes(m) {
		h.lanes.keyed = true
	}
	l := h.lanes.get(m.Lane())
	if l == nil && h.lanes.capped {
		// Its lane may have webhooks on disk from while there was no room
		// for it: take it up from its start (lanes_cap.go).
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
		return // read from its start when taken up again (lanes_cap.go)
	}
	room := h.count() < h.window() && l.q.len() < h.quota()
	if !room && !l.onDisk && l.q.len() == 0 && h.count() >= h.window() {
		room = d.makeRoom(h) // a key's first webhook waits one turn, not for a load
	}
	if !l.onDisk && room && d.fits(h, m) {
		l.cursor = m.ID
		d.admit(h, l, m, now)
		return
	}
	if l.q.len() == 0 {
		h.readSoon(l) // read at the next load, ahead of the lanes waiting for theirs
		return
	}
	h.setOnDisk(l, true)
}

// roomScan bounds the lanes makeRoom looks at.
const roomScan = 64

// makeRoom lets go of the newest webhook of the fullest lane among the
// next keys in the rotation, so that a key's first webhook is held
// without going over the window. The webhook stays queued on disk and
// its lane is read again from before it. A lane with webhooks waiting as
// ids or being read keeps what it has (its cursor must not go back), and
// so does a lane with one webhook (its key keeps its turn).
func (d *Dispatcher) makeRoom(h *host) bool {
	ls := h.lanes
	var big *lane
	for i, u := range ls.ring.buf[ls.ring.head:] {
		if i >= roomScan {
			break
		}
		for _, l := range u.lanes {
			if l != nil && l.refs == 0 && !l.loading && !l.leaving && l.q.len() > 1 && (big == nil || l.q.len() > big.q.len()) {
				big = l
			}
		}
	}
	if big == nil {
		return false
	}
	m := big.q.popBack()
	ls.mem--
	d.unkeep(h, m)
	big.cursor = m.ID - 1
	h.setOnDisk(big, true)
	return true
}

// resume marks h's queue as on disk, at a start: its default lane, and
// every other lane the spool has.
func (d *Dispatcher) resume(h *host) {
	h.setOnDisk(h.defaultLane(), true)
	for _, u := range d.opts.Reader.Lanes(h.name) {
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
func (d *Dispatcher) loadLanes(h *host) {
	ls := h.lanes
	if h.loading || ls.loadQ.len() == 0 {
		return
	}
	budget := d.loadSize(h)
	quota := h.quota()
	var jobs []laneRead
	for ls.loadQ.len() > 0 && budget > 0 && len(jobs) < maxLaneReads {
		l := ls.loadQ.pop()
		l.inLoadQ = false
		if l.leaving || ls.get(l.id) != l {
			continue // let go of (lanes_cap.go)
		}
		if !l.onDisk || l.q.len() >= quota {
			h.forget(l) // a full lane is queued again as pick drains it
			continue
		}
		n := min(quota-l.q.len(), budget)
		l.loading = true
		jobs = append(jobs, laneRead{l: l, after: l.cursor, n: n})
		budget -= n
	}
	if len(jobs) == 0 {
		return
	}
	h.loading = true
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.loads <- struct{}{}
		for i := range jobs {
			j := &jobs[i]
			j.msgs, j.err = d.opts.Reader.ReadLane(h.name, j.l.id, j.after, j.n)
		}
		<-d.loads
		d.mu.Lock()
		defer d.mu.Unlock()
		h.loading = false
		for _, j := range jobs {
			d.laneLoaded(h, j.l, j.msgs, j.n, j.err)
		}
		d.loadedPurged(h.name)
		d.pump(h)
	}()
}

// laneLoaded admits what a read of l returned (n asked for).
func (d *Dispatcher) laneLoaded(h *host, l *lane, msgs []*spool.Message, n int, err error) {
	l.loading = false
	if l.leaving {
		h.forget(l) // what it read stays on disk, for when it is taken up again
		return
	}
	if err != nil {
		d.log.Error("spool read failed", "host", h.name, "error", err)
		d.wake(h, time.Now().Add(time.Second))
		l.inLoadQ = true // read again at the next load
		h.lanes.loadQ.push(l)
		return
	}
	now := time.Now()
	for _, m := range msgs {
		if usesLanes(m) {
			h.lanes.keyed = true
		}
		if m.ID > l.cursor && !d.skipPurged(h.name, m) {
			l.cursor = m.ID
			if !h.lanes.settledRecently(m.ID) {
				d.admit(h, l, m, now)
			}
		}
	}
	h.setOnDisk(l, len(msgs) == n || l.lastSeen > l.cursor)
	h.forget(l)
}

// fifo is a queue that reuses its buffer.
type fifo[T any] struct {
	buf  []T
	head int
}

func (q *fifo[T]) len() int { return len(q.buf) - q.head }
func (q *fifo[T]) peek() T  { return q.buf[q.head] }
func (q *fifo[T]) push(v T) {
	if q.head > 0 && q.head >= len(q.buf)/2 {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
	q.buf = append(q.buf, v)
}

// pushFront puts v at the front, to be popped next.
func (q *fifo[T]) pushFront(v T) {
	if q.head > 0 {
		q.head--
		q.buf[q.head] = v
		return
	}
	q.buf = append([]T{v}, q.buf...)
}

func (q *fifo[T]) pop() T {
	v := q.buf[q.head]
	var zero T
	q.buf[q.head] = zero
	q.head++
	return v
}

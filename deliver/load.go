package deliver

// Filling a host's window: the messages the spool announces, and reading
// a plain host's queue from the spool (a host in lanes reads lane by
// lane: lanes_load.go).

import (
	"time"

	"github.com/hookpace/hookpace/spool"
)

// enqueued takes the messages the queue announces as durable, in id order
// (Start subscribes it).
func (d *Dispatcher) enqueued(msgs []*spool.Message) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.enqueueLocked(msgs)
}

func (d *Dispatcher) enqueueLocked(msgs []*spool.Message) {
	now := time.Now()
	var touched []*host
	for _, m := range msgs {
		h := d.hostLocked(m.Host)
		if h.lanes == nil && needsLanes(m) {
			h.enterLanes()
		}
		switch {
		case h.lanes != nil:
			d.enqueueLane(h, m, now)
		case m.ID <= h.cursor:
			continue // already read from the spool
		default:
			h.lastSeen = max(h.lastSeen, m.ID)
			if !h.onDisk && h.count() < h.window() && d.fits(h, m) {
				h.ready.push(m)
				h.cursor = m.ID
				d.keep(h, m)
			} else {
				h.onDisk = true
			}
		}
		h.active = now
		if len(touched) == 0 || touched[len(touched)-1] != h {
			touched = append(touched, h)
		}
	}
	for _, h := range touched {
		d.pump(h)
	}
}

// load reads the next part of host's queue from the spool, off the lock.
func (d *Dispatcher) load(h *host) {
	n := d.loadSize(h)
	if n <= 0 {
		return
	}
	h.loading = true
	after := h.cursor
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.loads <- struct{}{}
		msgs, err := d.opts.Reader.Read(h.name, after, n)
		<-d.loads
		d.mu.Lock()
		defer d.mu.Unlock()
		h.loading = false
		if err != nil {
			d.log.Error("spool read failed", "host", h.name, "error", err)
			d.wake(h, time.Now().Add(time.Second))
			return
		}
		d.loaded(h, msgs, n)
		d.loadedPurged(h.name)
		d.pump(h)
	}()
}

// loaded takes what a read of h's queue returned (n asked for). A
// message that needs lanes takes h into them: it and the rest go to the
// default lane, from where h's cursor had got to.
func (d *Dispatcher) loaded(h *host, msgs []*spool.Message, n int) {
	for i, m := range msgs {
		if h.lanes == nil && needsLanes(m) {
			h.enterLanes()
		}
		if h.lanes != nil {
			d.laneLoaded(h, h.lanes.lanes[spool.Lane{}], msgs[i:], n-i, nil)
			return
		}
		if m.ID > h.cursor && !d.skipPurged(h.name, m) {
			h.ready.push(m)
			h.cursor = m.ID
			d.keep(h, m)
		}
	}
	h.onDisk = len(msgs) == n || h.lastSeen > h.cursor
}

// earliest is the sooner of two wake times (zero: none).
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

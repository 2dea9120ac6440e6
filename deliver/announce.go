package deliver

// Filling a host's window (package window) with the messages the spool
// announces; the window reads the rest of its queue, lane by lane, itself.

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
		h.win.Announce(m, now)
		h.active = now.UnixNano()
		if len(touched) == 0 || touched[len(touched)-1] != h {
			touched = append(touched, h)
		}
	}
	for _, h := range touched {
		d.pump(h)
	}
}

// earliest is the sooner of two wake times (zero: none).
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

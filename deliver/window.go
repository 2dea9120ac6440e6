package deliver

// What a host's window (package window) asks of the dispatcher: the
// memory shared by all hosts, running its spool reads off the lock under
// the dispatcher's limit on reads at once, and pumping the host again.
// The window calls these with the dispatcher's lock held.

import (
	"time"

	"github.com/hookpace/hookpace/spool"
	"github.com/hookpace/hookpace/window"
)

var _ window.Env = (*host)(nil)

// Keep implements window.Env.
func (h *host) Keep(m *spool.Message) { h.d.keep(h, m) }

// Unkeep implements window.Env.
func (h *host) Unkeep(m *spool.Message) { h.d.unkeep(h, m) }

// Fits implements window.Env.
func (h *host) Fits(m *spool.Message) bool { return h.d.fits(h, m) }

// LoadSize implements window.Env.
func (h *host) LoadSize() int { return h.d.loadSize(h) }

// Busy implements window.Env: the attempts in flight, the batch members
// they carry beyond one each, and the deliveries answered whose delete is
// not durable yet (slots.go): none of them may be read again.
func (h *host) Busy() int { return h.sending + h.extra + h.unsettled }

// InFlight implements window.Env: h's attempts between the gate's
// Acquire and Release, counted by h, so that a Backlog method a gate
// calls under its own lock never calls the gate.
func (h *host) InFlight() int { return h.sending }

// Purged implements window.Env.
func (h *host) Purged(m *spool.Message) bool { return h.d.skipPurged(h.name, m) }

// Wake implements window.Env.
func (h *host) Wake(t time.Time) { h.d.wake(h, t) }

// Read implements window.Env: read runs on its own goroutine once one of
// the dispatcher's read slots is free; apply then runs with the lock
// held, the purged webhooks the host's loads can no longer see are
// forgotten, and the host is pumped.
func (h *host) Read(read func() (apply func())) bool {
	d := h.d
	if d.stopping {
		return false
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.loads <- struct{}{}
		apply := read()
		<-d.loads
		d.mu.Lock()
		defer d.mu.Unlock()
		apply()
		if !h.win.Loading() {
			d.loadedPurged(h.name)
		}
		d.pump(h)
	}()
	return true
}

// blockedLong reports whether h's gate said it can't send before blocked,
// far enough ahead that h's window should hold nothing until then.
func (h *host) blockedLong(blocked, now time.Time) bool {
	return !blocked.IsZero() && blocked.Sub(now) > window.SpillAfter && !h.gate.Paused()
}

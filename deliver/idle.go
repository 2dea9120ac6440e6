package deliver

import "time"

// A host with nothing queued and nothing to remember is forgotten after
// Options.IdleTTL, so that a stream of new destinations doesn't grow the
// dispatcher's memory without bound. One timer looks for them, armed
// while there are hosts.

// armSweeper makes sure idle hosts are looked for while there are hosts.
func (d *Dispatcher) armSweeper() {
	if d.sweeper != nil || len(d.hosts) == 0 || d.stopping {
		return
	}
	d.sweeper = time.AfterFunc(min(d.opts.IdleTTL, time.Minute), func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.sweeper = nil
		if d.stopping {
			return
		}
		d.forgetIdleLocked(time.Now())
		d.armSweeper()
	})
}

// forgetIdleLocked drops the hosts that have had nothing to do for IdleTTL
// and whose state is as good as new. A message for one of them later
// starts a fresh host.
func (d *Dispatcher) forgetIdleLocked(now time.Time) int {
	n := 0
	for name, h := range d.hosts {
		if now.Sub(h.active) < d.opts.IdleTTL || h.count() > 0 || !h.win.Settled() ||
			!h.wakeAt.IsZero() || !h.gate.Idle(now) ||
			h.learn != nil && now.Before(h.learn.until) {
			continue
		}
		if h.timer != nil {
			h.timer.Stop()
		}
		h.gate.Close()
		delete(d.hosts, name)
		n++
	}
	if n > 0 {
		d.log.Debug("forgot idle hosts", "hosts", n, "left", len(d.hosts))
	}
	return n
}

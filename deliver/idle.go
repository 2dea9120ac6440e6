package deliver

import "time"

// A host with nothing queued and nothing to remember is forgotten after
// Options.IdleTTL, so that a stream of new destinations doesn't grow the
// dispatcher's memory without bound. Before that, as soon as its pacer
// and window hold nothing a revived one would not, the host rests: they
// are dropped (localGate, window.Host.Rest), about half of what an idle
// host costs. One timer looks for both, every restEvery, armed while
// there are hosts.

// restEvery is how often idle hosts are looked for: a host rests within
// it of its pacer coming to rest. A look takes the dispatcher's lock
// for about 80 ns a host at rest (4 ms at 50,000 hosts).
const restEvery = 5 * time.Second

// armSweeper makes sure idle hosts are looked for while there are hosts.
func (d *Dispatcher) armSweeper() {
	if d.sweeper != nil || len(d.hosts) == 0 || d.stopping {
		return
	}
	d.sweeper = time.AfterFunc(min(d.opts.IdleTTL, restEvery), func() {
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
// and whose state is as good as new, and rests the others that have
// nothing to do. A message for a forgotten one later starts a fresh host.
func (d *Dispatcher) forgetIdleLocked(now time.Time) int {
	n := 0
	for name, h := range d.hosts {
		if h.count() > 0 || !h.win.Settled() || !h.wakeAt.IsZero() {
			continue
		}
		if now.UnixNano()-h.active < int64(d.opts.IdleTTL) || !h.gate.Idle(now) ||
			h.learn != nil && now.Before(h.learn.until) {
			h.rest(now)
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

// rest drops what h holds that a revived one would make again as it was:
// its window's default lane (window.Host.Rest) and a lone host's pacer
// (localGate.rest). h has nothing queued in memory, out or due.
func (h *host) rest(now time.Time) {
	if h.sending > 0 || h.unsettled > 0 || h.extra > 0 || h.slotWaiting || h.landing {
		return
	}
	h.win.Rest()
	if h.pace != nil && h.learn == nil {
		(*localGate)(h).rest(now)
	}
}

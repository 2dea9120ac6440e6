package deliver

import (
	"errors"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// A host's pause is kept in the queue's durable record (which Start
// applies again after a restart), in its gate, and, with shared gates, in
// the other replicas' (Gates.Tell). setPause is the one path that changes
// them, whoever asked: an operator on this replica (Pause, Resume), or
// another replica, as the gates learned (pausedElsewhere).

// byElsewhere marks a change that came from another replica: the gates
// know it already.
const byElsewhere = "fleet"

// Pause stops sending to host (attempts in flight finish) until Resume,
// on every replica of a fleet. The pause is recorded in the queue first,
// so that it holds across a restart; if that fails, nothing changes
// (but for a full disk: see setPause).
// Pausing a host hookpace has not seen yet is allowed.
func (d *Dispatcher) Pause(name string) error {
	d.pauseMu.Lock()
	defer d.pauseMu.Unlock()
	return d.setPause(name, true, "operator")
}

// PauseBy pauses host name as Pause does, and keeps why (who paused it)
// for the status page: a pause that a hand-off from another hookpace
// carried reads "hand-off from pod-a: paused by an operator".
func (d *Dispatcher) PauseBy(name, why string) error {
	d.pauseMu.Lock()
	defer d.pauseMu.Unlock()
	if err := d.setPause(name, true, why); err != nil {
		return err
	}
	d.mu.Lock()
	d.purges.pausedWhy[name] = why
	d.mu.Unlock()
	return nil
}

// HoldUntil holds host name until until, unless it is held that long
// already, and reports whether it did: a hold that a hand-off carried (a
// partner's 429 Retry-After or used-up quota, answered to another
// hookpace). It is the gate's quota hold (shown as "quota"): nothing
// failed here, so the rate is not lowered, and sends resume at the rate.
func (d *Dispatcher) HoldUntil(name string, until time.Time, why string) bool {
	now := time.Now()
	if !until.After(now) {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.hostLocked(name)
	if !h.gate.State(now).HeldUntil.Before(until) || !h.gate.Quota(now, 0, until) {
		return false
	}
	d.log.Info("host held", "host", name, "until", until.UTC().Format(time.RFC3339Nano), "by", why)
	return true
}

// Resume undoes Pause, on every replica of a fleet. It reports false, and
// changes nothing, for a host that neither this replica nor the fleet
// knows paused.
func (d *Dispatcher) Resume(name string) (bool, error) {
	d.pauseMu.Lock()
	defer d.pauseMu.Unlock()
	d.mu.Lock()
	known := d.hosts[name] != nil
	d.mu.Unlock()
	if !known {
		// Paused on other replicas perhaps: resumed for the fleet.
		return d.opts.Gates != nil && d.opts.Gates.Tell(name, false), nil
	}
	return true, d.setPause(name, false, "operator")
}

// setPause pauses or resumes host name: the queue's durable record first
// (if that fails, nothing changes), then the other replicas', unless the
// change came from them, then the host's gate. Called with pauseMu held
// and mu not.
//
// With the disk filled by something else, the record cannot be written;
// the pause or resume applies all the same, and is recorded once space
// returns (recordPending): an operator pausing for a partner, or resuming
// to drain, must not wait for space, and a restart must not undo it.
func (d *Dispatcher) setPause(name string, paused bool, by string) error {
	if err := d.opts.Store.SetPaused(name, paused); errors.Is(err, spool.ErrDiskFull) {
		if d.unrecorded == nil {
			d.unrecorded = map[string]bool{}
		}
		d.unrecorded[name] = paused
		d.armRerecord()
		d.log.Warn(pauseWord(paused)+" not recorded: the spool's disk is full; it applies now, and is recorded once space returns",
			"host", name, "error", err.Error())
	} else if err != nil {
		return err
	} else {
		delete(d.unrecorded, name)
	}
	if by != byElsewhere && d.opts.Gates != nil {
		d.opts.Gates.Tell(name, paused)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.hostLocked(name) // forgotten meanwhile if it was not paused
	d.notePause(name, paused, by)
	if paused {
		h.gate.Pause()
		d.log.Info("host paused", "host", name, "by", by)
		return nil
	}
	h.gate.Resume()
	d.log.Info("host resumed", "host", name, "by", by)
	h.win.Unstage() // picked during the pause: picked again with what came since
	d.pump(h)
	return nil
}

// pausedElsewhere records a pause or resume that the gates learned from
// another replica, off the gates' goroutine (the record is a write). Stop
// waits for it, after the gates stopped: a pause learned while stopping is
// recorded all the same.
func (d *Dispatcher) pausedElsewhere(name string, paused bool) {
	d.pausing.Add(1)
	go func() {
		defer d.pausing.Done()
		d.pauseMu.Lock()
		defer d.pauseMu.Unlock()
		if err := d.setPause(name, paused, byElsewhere); err != nil {
			what := "host paused by the fleet, not recorded: a restart before the fleet answers would send"
			if !paused {
				what = "host resumed by the fleet, not recorded: it stays paused here"
			}
			d.log.Warn(what, "host", name, "error", err.Error())
		}
	}()
}

// recordRetryEvery is how often changes applied unrecorded on a full disk
// are tried again.
const recordRetryEvery = 2 * time.Second

func pauseWord(paused bool) string {
	if paused {
		return "pause"
	}
	return "resume"
}

// armRerecord makes sure recordPending runs while changes wait to be
// recorded. Called with pauseMu held.
func (d *Dispatcher) armRerecord() {
	if d.recordRetry == nil && len(d.unrecorded) > 0 {
		d.recordRetry = time.AfterFunc(recordRetryEvery, d.recordPending)
	}
}

// recordPending records the pauses and resumes applied while the disk was
// full, once it has room, so that a restart keeps them.
func (d *Dispatcher) recordPending() {
	d.pauseMu.Lock()
	defer d.pauseMu.Unlock()
	d.recordRetry = nil
	d.mu.Lock()
	stopping := d.stopping
	d.mu.Unlock()
	if stopping {
		return
	}
	for name, paused := range d.unrecorded {
		err := d.opts.Store.SetPaused(name, paused)
		if errors.Is(err, spool.ErrDiskFull) {
			break // still full: all of them wait
		} else if err != nil {
			d.log.Warn(pauseWord(paused)+" still not recorded", "host", name, "error", err.Error())
			continue
		}
		delete(d.unrecorded, name)
		d.log.Info(pauseWord(paused)+" recorded: the spool's disk has room again", "host", name)
	}
	d.armRerecord()
}

// stopRerecord stops recordPending's timer; what it had not recorded
// stays unrecorded, and the log says so.
func (d *Dispatcher) stopRerecord() {
	d.pauseMu.Lock()
	defer d.pauseMu.Unlock()
	if d.recordRetry != nil {
		d.recordRetry.Stop()
		d.recordRetry = nil
	}
	for name, paused := range d.unrecorded {
		d.log.Warn(pauseWord(paused)+" never recorded (the disk stayed full): a restart goes by the last record", "host", name)
	}
}

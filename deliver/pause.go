package deliver

import (
	"context"
	"time"

	"github.com/hookpace/hookpace/fleet"
)

// A host's pause is kept in three places: the queue's durable record
// (which Start applies again after a restart), the fleet's record in Redis
// (fleet mode) and the host's gate (its pacer). setPause is the one path
// that changes them, whoever asked: an operator on this replica (Pause,
// Resume), or another replica, as the fleet says (learnPause, syncPauses).
// A resume anywhere clears the pause everywhere: every replica asks the
// fleet about its paused hosts every pauseSyncEvery, whether or not it has
// webhooks queued for them.

// pauseSyncEvery is how often a replica asks the fleet about its paused
// hosts.
const pauseSyncEvery = time.Second

// pauseSync asks the fleet about paused hosts, guarded by the
// dispatcher's mutex.
type pauseSync struct {
	timer *time.Timer // armed while a host is paused, in fleet mode
	// untold are the hosts paused here while the fleet did not answer,
	// guarded by pauseMu: the fleet is told again, and what it says of
	// them (an older resume) does not resume them.
	untold map[string]bool
}

// Pause stops sending to host (attempts in flight finish) until Resume,
// on every replica of a fleet. The pause is recorded in the queue first,
// so that it holds across a restart; if that fails, nothing changes.
// Pausing a host hookpace has not seen yet is allowed.
func (d *Dispatcher) Pause(name string) error {
	d.pauseMu.Lock()
	defer d.pauseMu.Unlock()
	return d.setPause(name, true, "operator")
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
		return d.opts.Fleet != nil && d.tellFleet(name, false), nil
	}
	return true, d.setPause(name, false, "operator")
}

// setPause pauses or resumes host name: the queue's durable record first
// (if that fails, nothing changes), then the fleet's, unless by is
// "fleet" (the change came from it), then the host's gate. Called with
// pauseMu held and mu not.
func (d *Dispatcher) setPause(name string, paused bool, by string) error {
	if err := d.opts.Queue.SetPaused(name, paused); err != nil {
		return err
	}
	if by != "fleet" && d.opts.Fleet != nil {
		told := d.tellFleet(name, paused)
		d.untold(name, paused && !told)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.hostLocked(name) // forgotten meanwhile if it was not paused
	if paused {
		h.pace.Pause()
		d.log.Info("host paused", "host", name, "by", by)
		d.armPauseSync()
		return nil
	}
	h.pace.Resume()
	d.log.Info("host resumed", "host", name, "by", by)
	d.pump(h)
	return nil
}

// tellFleet records a pause or resume in the fleet, and reports whether
// it answered.
func (d *Dispatcher) tellFleet(name string, paused bool) bool {
	var err error
	if paused {
		err = d.opts.Fleet.Pause(context.Background(), name)
	} else {
		err = d.opts.Fleet.Resume(context.Background(), name)
	}
	if err != nil {
		what := "host resumed on this replica only: the fleet did not answer"
		if paused {
			what = "host paused on this replica only until the fleet answers"
		}
		d.log.Warn(what, "host", name, "error", err.Error())
	}
	return err == nil
}

// untold notes whether name is paused here and not yet in the fleet.
// Called with pauseMu held.
func (d *Dispatcher) untold(name string, untold bool) {
	if !untold {
		delete(d.pauses.untold, name)
		return
	}
	if d.pauses.untold == nil {
		d.pauses.untold = map[string]bool{}
	}
	d.pauses.untold[name] = true
}

// learnPause applies a pause that the fleet's answer for h says another
// replica made: the gate at once, then the queue's record, off the lock.
// Called with mu held.
func (d *Dispatcher) learnPause(h *host) {
	h.pace.Pause()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.pauseMu.Lock()
		defer d.pauseMu.Unlock()
		if err := d.setPause(h.name, true, "fleet"); err != nil {
			d.log.Warn("host paused by the fleet, not recorded: a restart without Redis would send", "host", h.name,
				"error", err.Error())
		}
	}()
}

// armPauseSync makes sure the fleet is asked about paused hosts while
// there are any. Called with mu held.
func (d *Dispatcher) armPauseSync() {
	if d.opts.Fleet == nil || d.pauses.timer != nil || d.stopping {
		return
	}
	d.pauses.timer = time.AfterFunc(pauseSyncEvery, func() {
		more := d.syncPauses()
		d.mu.Lock()
		defer d.mu.Unlock()
		d.pauses.timer = nil
		if more {
			d.armPauseSync()
		}
	})
}

// syncPauses asks the fleet about the hosts paused here, in one round
// trip: one resumed elsewhere is resumed here, its record cleared; one the
// fleet does not know paused (Redis lost it, or it expired) is paused in
// the fleet again, as the record here says. It reports whether any host
// is paused here.
func (d *Dispatcher) syncPauses() bool {
	d.pauseMu.Lock()
	defer d.pauseMu.Unlock()
	d.mu.Lock()
	var names []string
	for name, h := range d.hosts {
		if h.pace.Paused() {
			names = append(names, name)
		}
	}
	degraded := d.fleetDegraded
	d.mu.Unlock()
	if len(names) == 0 || degraded {
		return len(names) > 0
	}
	states, err := d.opts.Fleet.PauseStates(context.Background(), names)
	if err != nil {
		return true // the limiter is degraded; its heartbeat looks for Redis
	}
	paused := false
	for i, name := range names {
		switch {
		case d.pauses.untold[name]:
			d.untold(name, !d.tellFleet(name, true))
			paused = true
		case states[i] == fleet.Resumed:
			if err := d.setPause(name, false, "fleet"); err != nil {
				d.log.Warn("host resumed by the fleet, not recorded: it stays paused here", "host", name, "error", err.Error())
				paused = true
			}
		case states[i] == fleet.PauseUnknown:
			d.tellFleet(name, true)
			paused = true
		default:
			paused = true
		}
	}
	return paused
}

package deliver

// The dispatcher's operational events, which Options.Events
// receives and package events sends to events.url: a webhook died, a
// breaker opened or closed, a host paused itself. Each is reported where
// it happens, on the dispatcher's lock or off it; Options.Events never
// blocks.

import (
	"time"

	"github.com/hookpace/hookpace/pacer"
	"github.com/hookpace/hookpace/spool"
)

// The types of the dispatcher's events (package events adds those it
// finds itself: spool watermarks, long holds, the end of a hand-off).
const (
	// EventMessageDead: a webhook went to the dead letters (max_attempts,
	// max_age, a permanent answer). Data: id, method, url (redacted),
	// reason, attempts, enqueued_at, last_status (when there was one),
	// ordering_key (for a webhook of an ordered key).
	EventMessageDead = "message.dead"
	// EventBreakerOpened and EventBreakerClosed: a host's breaker opened
	// (Data: from, reason, probe_at) or closed again (Data: from,
	// opened_at, failed_probes): one of each per outage. A failed probe
	// that opens the breaker again is no new event.
	EventBreakerOpened = "breaker.opened"
	EventBreakerClosed = "breaker.closed"
	// EventHostPaused: auto_pause_after paused a host. Data: reason,
	// failing_since, auto_pause_after, last_error.
	EventHostPaused = "host.paused"
)

// emit hands an event to Options.Events, if set.
func (d *Dispatcher) emit(typ, host string, at time.Time, data map[string]any) {
	if d.opts.Events == nil {
		return
	}
	d.opts.Events(Event{Type: typ, Host: host, At: at, Data: data})
}

// emitDead reports that m went to the dead letters for reason. An operator's
// purge or bury is not reported: the operator asked for it.
func (d *Dispatcher) emitDead(m *spool.Message, reason string, at time.Time) {
	if d.opts.Events == nil {
		return
	}
	data := map[string]any{
		"id":          m.Ref().String(),
		"method":      m.Method,
		"url":         spool.RedactURL(m.URL),
		"reason":      reason,
		"attempts":    m.Attempts,
		"enqueued_at": m.Enqueued.UTC(),
	}
	if m.LastStatus != 0 {
		data["last_status"] = m.LastStatus
	}
	if m.Ordering != "" {
		data["ordering_key"] = m.Ordering
	}
	d.emit(EventMessageDead, m.Host, at, data)
}

// emitBreaker reports h's breaker opening or closing, once an outage:
// breaker.opened when it opens from closed, breaker.closed when it closes
// again. A failed half-open probe that opens it again is the same outage
// (no event; breaker.closed says how many there were), and half-open, the
// probe, is no event either. d.mu is held.
func (d *Dispatcher) emitBreaker(h *host, was, state string, probeAt time.Time, why string) {
	now := time.Now()
	switch {
	case state == pacer.BreakerOpen && was == pacer.BreakerHalfOpen && !h.troubleR().outageAt.IsZero():
		h.troubleW().outageProbes++
	case state == pacer.BreakerOpen:
		t := h.troubleW()
		t.outageAt, t.outageProbes = now, 0
		data := map[string]any{"from": was, "probe_at": probeAt.UTC()}
		if why != "" {
			data["reason"] = why
		}
		d.emit(EventBreakerOpened, h.name, now, data)
	case state == pacer.BreakerClosed:
		t := h.troubleR()
		data := map[string]any{"from": was, "failed_probes": t.outageProbes}
		if !t.outageAt.IsZero() {
			data["opened_at"] = t.outageAt.UTC()
		}
		if h.trouble != nil {
			h.trouble.outageAt, h.trouble.outageProbes = time.Time{}, 0
		}
		d.emit(EventBreakerClosed, h.name, now, data)
	}
}

// pauseAuto pauses host name for auto_pause_after, as Pause does for an
// operator, and keeps why for the status page.
func (d *Dispatcher) pauseAuto(name, why string) error {
	d.pauseMu.Lock()
	defer d.pauseMu.Unlock()
	if err := d.setPause(name, true, byAutoPause); err != nil {
		return err
	}
	d.mu.Lock()
	d.purges.pausedWhy[name] = why
	d.mu.Unlock()
	return nil
}

// PausedByOperator is HostStatus.PausedWhy for an operator's pause
// (hookpace pause, the API, the page).
const PausedByOperator = "paused by an operator"

// byAutoPause marks a pause that auto_pause_after made.
const byAutoPause = "auto_pause_after"

// notePause records who paused host name (by), or forgets it once the
// host is resumed; d.mu is held.
func (d *Dispatcher) notePause(name string, paused bool, by string) {
	if !paused {
		delete(d.purges.pausedWhy, name)
		return
	}
	if d.purges.pausedWhy == nil {
		d.purges.pausedWhy = map[string]string{}
	}
	switch by {
	case byElsewhere:
		d.purges.pausedWhy[name] = "paused on another replica of the fleet"
	case byAutoPause:
		d.purges.pausedWhy[name] = "auto_pause_after" // pauseAuto says more
	default:
		d.purges.pausedWhy[name] = PausedByOperator
	}
}

// pausedWhyLocked says why host name is paused ("" when it is not); a
// pause recorded before the last start has no more to say.
func (d *Dispatcher) pausedWhyLocked(name string, paused bool) string {
	if !paused {
		return ""
	}
	if why := d.purges.pausedWhy[name]; why != "" {
		return why
	}
	return "paused (recorded before hookpace last started)"
}

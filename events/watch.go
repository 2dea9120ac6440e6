package events

import (
	"context"
	"time"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/spool"
)

// Event types that Watch and the hand-off find; the dispatcher's are
// deliver.EventMessageDead and the others.
const (
	// SpoolHighWater: the spool went past its high-water mark and refuses
	// new webhooks. Data: messages, bytes, max_messages, max_bytes, usage,
	// high_water, low_water.
	SpoolHighWater = "spool.high_water"
	// SpoolLowWater: the spool is back under its low-water mark and
	// accepts again. Data as SpoolHighWater.
	SpoolLowWater = "spool.low_water"
	// HostHeld: a host has been held (429, a quota, a name that does not
	// resolve) longer than events.held_after. Data: held_since,
	// held_until, hold_reason, queued.
	HostHeld = "host.held"
	// HandoffEnded: the hand-off at shutdown ended. Data: target
	// (redacted), handed_off, left, took_ms, kept (by reason), error.
	HandoffEnded = "handoff.ended"
)

// Source is what Watch looks at: the spool's usage and the dispatcher's
// hosts (*spool.Spool's Usage, *deliver.Dispatcher's Hosts).
type Source struct {
	Usage func() spool.Usage
	Hosts func() []deliver.HostStatus
}

// watchState is what Watch saw last.
type watchState struct {
	high     bool                 // past the high-water mark
	heldFrom map[string]time.Time // held hosts: since when, as first seen
	reported map[string]bool      // held hosts reported this hold
}

// WatchEvery is how often Watch looks.
const WatchEvery = time.Second

// Watch reports watermark crossings and long holds until ctx is done,
// looking every WatchEvery. A nil Emitter returns at once.
func (e *Emitter) Watch(ctx context.Context, src Source) {
	if e == nil {
		return
	}
	t := time.NewTicker(WatchEvery)
	defer t.Stop()
	for {
		e.Check(time.Now(), src.Usage(), src.Hosts())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Check compares what it is given at now with what it saw before and
// emits what changed; Watch calls it, tests call it with their own clock.
// It must not be called concurrently.
func (e *Emitter) Check(now time.Time, u spool.Usage, hosts []deliver.HostStatus) {
	if high := u.Refusal == spool.RefusalHighWater; high != e.w.high {
		e.w.high = high
		typ := SpoolLowWater
		if high {
			typ = SpoolHighWater
		}
		e.Emit(deliver.Event{Type: typ, At: now, Data: map[string]any{
			"messages": u.Messages, "bytes": u.Bytes, "max_messages": u.MaxMessages, "max_bytes": u.MaxBytes,
			"usage": u.Fraction, "high_water": u.HighWater, "low_water": u.LowWater}})
	}
	e.checkHeld(now, hosts)
}

// checkHeld reports each host held for longer than HeldAfter, once a hold.
func (e *Emitter) checkHeld(now time.Time, hosts []deliver.HostStatus) {
	if e.w.heldFrom == nil {
		e.w.heldFrom, e.w.reported = map[string]time.Time{}, map[string]bool{}
	}
	held := make(map[string]bool, len(e.w.heldFrom))
	for _, h := range hosts {
		if h.HeldUntil == nil || h.Paused || h.Host == e.opts.Host {
			continue
		}
		held[h.Host] = true
		from, ok := e.w.heldFrom[h.Host]
		if !ok {
			from = now
			e.w.heldFrom[h.Host] = now
		}
		if e.w.reported[h.Host] || now.Sub(from) < e.opts.HeldAfter {
			continue
		}
		e.w.reported[h.Host] = true
		e.Emit(deliver.Event{Type: HostHeld, Host: h.Host, At: now, Data: map[string]any{
			"held_since": from.UTC(), "held_until": h.HeldUntil.UTC(), "hold_reason": h.HoldReason, "queued": h.Queued}})
	}
	for name := range e.w.heldFrom {
		if !held[name] {
			delete(e.w.heldFrom, name)
			delete(e.w.reported, name)
		}
	}
}

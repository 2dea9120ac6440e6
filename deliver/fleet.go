package deliver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hookpace/hookpace/fleet"
	"github.com/hookpace/hookpace/pacer"
)

// Fleet mode (Options.Fleet set): a host sends only with a lease granted
// by the fleet's shared limits in Redis. Asking is a network call, so it
// runs off the lock on one asker goroutine, which sends the asks of every
// host that has one queued in one round trip (fleetask.go) and re-enters
// the lock with the answers; a host has one ask under way at a time, and
// attempts that finished meanwhile are reported with its next ask. A
// host with a backlog keeps the leases of its successful attempts for its
// next sends, with tokens taken ahead (fleetcarry.go), so that its slots
// need not wait for a round trip. While Redis does not answer, hosts pace
// alone with their share of the limits (fleet.Share) on their pacer.Host,
// and attempts started so ("unleased") keep the host on its share until
// they finish.

// tokensAheadFor is how long tokens taken ahead may be used.
const tokensAheadFor = fleet.TokensFor

// fleetHost is a host's side of the fleet's protocol (fleet.Host),
// guarded by the dispatcher's mutex.
type fleetHost struct{ fleet.Host }

func (f *fleetHost) busy() bool { return f != nil && f.Busy() }

// shared reports whether h paces on the fleet's shared limits now.
func (d *Dispatcher) shared(h *host) bool {
	return d.opts.Fleet != nil && !d.fleetDegraded && h.fl.Unleased() == 0
}

// limitsFor is what h's own pacer enforces: all of pol's limits, or the
// replica's share of them while the fleet is degraded (or attempts started
// then are still running).
func (d *Dispatcher) limitsFor(h *host) pacer.Limits {
	if d.opts.Fleet != nil && (d.fleetDegraded || h.fl.Unleased() > 0) {
		return fleet.Share(h.limits(), d.fleetLive)
	}
	return h.limits()
}

// acquire takes a send slot for h: from the fleet when shared, else from
// h's own pacer. lease is "" for a slot not counted in Redis.
func (d *Dispatcher) acquire(h *host, now time.Time) (ok bool, wake time.Time, lease string) {
	if d.opts.Fleet == nil {
		ok, wake = h.pace.Acquire(now)
		return ok, wake, ""
	}
	if !d.shared(h) {
		ok, wake = h.pace.Acquire(now)
		if ok {
			h.fl.StartUnleased()
		}
		return ok, wake, ""
	}
	ready, carry, retry := h.fl.Ready(now)
	if !ready {
		if h.pace.Paused() {
			return false, time.Time{}, "" // a resume pumps h
		}
		if now.Before(retry) {
			return false, retry, ""
		}
		d.askFleet(h)
		return false, time.Time{}, "" // the answer pumps h
	}
	if ok, wake = h.pace.Take(now); !ok {
		return false, wake, ""
	}
	return true, time.Time{}, h.fl.Use(carry)
}

// afterPump gives back leases h could not use and reports finished
// attempts that no ask for more will carry.
func (d *Dispatcher) afterPump(h *host) {
	if d.opts.Fleet == nil || d.stopping {
		return
	}
	now := time.Now()
	if h.fl.Pumped(now, func() bool { p, _, _ := h.next(now); return p.empty() }) {
		d.askFleet(h)
	}
}

// due is how many sends h could start now: its ready messages (a batch is
// one send) and its retries that are due.
func (h *host) due(now time.Time) int {
	n := (h.ready.len() + h.pol.Batch.events() - 1) / h.pol.Batch.events()
	for _, it := range h.retry.items {
		if it.at.After(now) {
			break
		}
		n++
	}
	return n
}

// askFleet queues an ask for h's next sends (carrying its finished
// attempts) for the fleet's asker, unless h has one under way.
func (d *Dispatcher) askFleet(h *host) {
	if h.fl.Asking() || d.stopping {
		return
	}
	now := time.Now()
	n := fleet.Need{Host: h.name, Limits: h.limits(), Live: d.fleetLive, Shared: d.shared(h), InFlight: h.pace.InFlight()}
	if n.Shared {
		n.Due, n.Paused = h.due(now), h.pace.Paused()
	}
	if req, ok := h.fl.Ask(now, n); ok {
		d.fleetAsk(h, req)
	}
}

// applyGrant applies the answer g to h's ask req (nil: Redis did not
// answer).
func (d *Dispatcher) applyGrant(h *host, g *fleet.Grant, req fleet.Request, now time.Time) {
	h.fl.Answered(now, req, g, d.fleetDegraded, d.asks.tokensFor)
	// A pause on another replica is this replica's too; a resume is
	// learned by syncPauses, which tells it from a pause Redis lost.
	if g != nil && !d.fleetDegraded && g.Paused && !h.pace.Paused() {
		d.learnPause(h)
	}
}

// fleetReleased records a finished attempt for the fleet.
func (d *Dispatcher) fleetReleased(h *host, lease string, r pacer.Result, now time.Time) {
	if d.opts.Fleet == nil {
		return
	}
	if lease == "" {
		h.fl.Released(now, "", r, false)
		if h.fl.Unleased() == 0 && !d.fleetDegraded {
			h.pace.SetLimits(h.limits(), now) // back to shared limits
		}
		return
	}
	keep := h.fl.Keep(r, d.shared(h), h.limits(), d.fleetLive, func() int { return h.due(now) })
	h.fl.Released(now, lease, r, keep)
}

// fleetChanged applies the limiter's state (degraded or shared, live
// replicas) to every host. It is the limiter's OnChange callback.
func (d *Dispatcher) fleetChanged() {
	degraded, live, _ := d.opts.Fleet.State()
	d.mu.Lock()
	defer d.mu.Unlock()
	was := d.fleetDegraded
	d.fleetDegraded, d.fleetLive = degraded, live
	now := time.Now()
	for _, h := range d.hosts {
		h.pace.SetLimits(d.limitsFor(h), now)
		if degraded && !was {
			h.pace.Drain(now)
			h.fl.Degraded() // the leases expire; the tokens are spent
		}
		if h.timer != nil {
			h.timer.Stop()
			h.wakeAt = time.Time{}
		}
		d.pump(h)
	}
}

// renew keeps lease alive while an attempt runs; stop it when done. Most
// attempts end long before a third of the lease period, so nothing runs for
// them but a timer: no goroutine or ticker per attempt.
func (d *Dispatcher) renew(host, lease string) (stop func()) {
	if lease == "" {
		return func() {}
	}
	every := d.opts.Fleet.LeasePeriod() / 3
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(every, func() {
		d.opts.Fleet.Renew(context.Background(), host, []string{lease})
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			t.Reset(every)
		}
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// fleetStatus is the fleet part of a host's status.
func (d *Dispatcher) fleetStatus(h *host, hs *HostStatus, now time.Time) {
	if d.opts.Fleet == nil {
		return
	}
	if !d.shared(h) {
		hs.Fleet = fmt.Sprintf("degraded: local share 1/%d", d.fleetLive)
		return
	}
	hs.Fleet = "shared"
	g, lastAt := h.fl.Last()
	if lastAt.IsZero() {
		return
	}
	hs.FleetInFlight = &g.InFlight
	if g.HeldFor > 0 {
		if until := lastAt.Add(g.HeldFor); until.After(now) && hs.HeldUntil == nil {
			u := until.UTC()
			hs.HeldUntil, hs.HoldReason = &u, g.Reason
		}
	}
	if g.Breaker != "" && g.Breaker != "closed" && hs.Breaker == "closed" {
		hs.Breaker = g.Breaker
	}
	hs.Rate = min(hs.Rate, g.Rate)
}

// FleetStatus is what operators see of the fleet (GET /v1/hosts).
type FleetStatus struct {
	Replica  string `json:"replica"`
	Live     int    `json:"live_replicas"`
	Degraded bool   `json:"degraded"`
	// State is "shared", or "degraded: local share 1/N" while Redis does
	// not answer.
	State string `json:"state"`
	Error string `json:"error,omitempty"`
}

// Fleet reports the fleet's state; nil without a fleet.
func (d *Dispatcher) Fleet() *FleetStatus {
	if d.opts.Fleet == nil {
		return nil
	}
	degraded, live, why := d.opts.Fleet.State()
	st := &FleetStatus{Replica: d.opts.Fleet.Replica(), Live: live, Degraded: degraded, State: "shared", Error: why}
	if degraded {
		st.State = fmt.Sprintf("degraded: local share 1/%d", live)
	}
	return st
}

// flushFleet gives back, at Stop, the leases of finished attempts and
// unused grants, so that the other replicas need not wait for them to
// expire; it gives up after 2 s (they expire anyway).
func (d *Dispatcher) flushFleet() {
	if d.opts.Fleet == nil {
		return
	}
	d.mu.Lock()
	var reqs []fleet.Request
	for _, h := range d.hosts {
		rel, back := h.fl.Flush()
		if len(rel) > 0 || back > 0 {
			reqs = append(reqs, fleet.Request{Host: h.name, Limits: h.pol.Limits, Releases: rel, GiveBack: back})
		}
	}
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for len(reqs) > 0 {
		n := min(len(reqs), maxAskBatch)
		if _, err := d.opts.Fleet.AskMany(ctx, reqs[:n]); err != nil {
			return
		}
		reqs = reqs[n:]
	}
}

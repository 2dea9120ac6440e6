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

// fleetHost is a host's fleet state, guarded by the dispatcher's mutex.
type fleetHost struct {
	asking   bool
	grants   []string        // leases granted and not used yet
	carry    []string        // leases kept from successful attempts, for the next sends
	tokens   int             // taken ahead, for sends on carried leases
	tokensBy time.Time       // ... until then; given back after
	done     []fleet.Release // finished attempts not reported yet
	unleased int             // attempts in flight started on the local share
	retryAt  time.Time       // do not ask for more before (zero: whenever needed)
	last     fleet.Grant     // the last answer, for operators
	lastAt   time.Time
}

func (f *fleetHost) busy() bool {
	return f != nil && (f.asking || len(f.grants) > 0 || len(f.carry) > 0 || f.tokens > 0 || len(f.done) > 0 || f.unleased > 0)
}

// fleetPoll is how often a host asks again when no time is known: slots
// taken by other replicas are looked for at about the host's rate, a
// pause elsewhere every second.
func fleetPoll(g fleet.Grant, rate float64) time.Duration {
	if g.Paused {
		return time.Second
	}
	return min(max(time.Duration(float64(time.Second)/max(rate, 1)), 10*time.Millisecond), 250*time.Millisecond)
}

// shared reports whether h paces on the fleet's shared limits now.
func (d *Dispatcher) shared(h *host) bool {
	return d.opts.Fleet != nil && !d.fleetDegraded && h.fl.unleased == 0
}

// limitsFor is what h's own pacer enforces: all of pol's limits, or the
// replica's share of them while the fleet is degraded (or attempts started
// then are still running).
func (d *Dispatcher) limitsFor(h *host) pacer.Limits {
	if d.opts.Fleet != nil && (d.fleetDegraded || h.fl.unleased > 0) {
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
			h.fl.unleased++
		}
		return ok, wake, ""
	}
	carry := len(h.fl.grants) == 0 && h.fl.canCarry(now)
	if len(h.fl.grants) == 0 && !carry {
		if h.pace.Paused() {
			return false, time.Time{}, "" // a resume pumps h
		}
		if now.Before(h.fl.retryAt) {
			return false, h.fl.retryAt, ""
		}
		d.askFleet(h)
		return false, time.Time{}, "" // the answer pumps h
	}
	if ok, wake = h.pace.Take(now); !ok {
		return false, wake, ""
	}
	if carry {
		h.fl.tokens--
		lease = h.fl.carry[len(h.fl.carry)-1]
		h.fl.carry = h.fl.carry[:len(h.fl.carry)-1]
		return true, time.Time{}, lease
	}
	lease = h.fl.grants[0]
	h.fl.grants = h.fl.grants[1:]
	return true, time.Time{}, lease
}

// afterPump gives back leases h could not use and reports finished
// attempts that no ask for more will carry.
func (d *Dispatcher) afterPump(h *host) {
	if d.opts.Fleet == nil || d.stopping {
		return
	}
	for _, l := range h.fl.grants {
		h.fl.done = append(h.fl.done, fleet.Release{Lease: l, Outcome: pacer.NoSend})
	}
	h.fl.grants = nil
	if d.dropCarry(h, time.Now()) || len(h.fl.done) > 0 {
		d.askFleet(h)
	}
}

// wanted is how many sends h could start now: due messages, at most its
// concurrency (counting the leases it keeps); due is all due sends.
func (h *host) wanted(now time.Time) (want, due int) {
	n := (h.ready.len() + h.pol.Batch.events() - 1) / h.pol.Batch.events() // a batch is one send
	for _, it := range h.retry.items {
		if it.at.After(now) {
			break
		}
		n++
	}
	return min(n, max(h.pol.Limits.Concurrency-h.pace.InFlight()-len(h.fl.carry), 0)), n
}

// askFleet queues an ask for h's next sends (carrying its finished
// attempts) for the fleet's asker, unless h has one under way.
func (d *Dispatcher) askFleet(h *host) {
	now := time.Now()
	if h.fl.asking || d.stopping {
		return
	}
	req := fleet.Request{Host: h.name, Limits: h.limits()}
	back, expired := d.expireTokens(h, now) // before Releases: it may give kept leases back
	req.Releases = h.fl.done
	if d.shared(h) {
		want, due := h.wanted(now)
		if now.Before(h.fl.retryAt) || h.pace.Paused() {
			want, due = 0, 0 // the bucket is empty, or paused: no token ahead either
		}
		req.Want = want
		if !expired {
			req.Ahead, back = d.tokensAhead(h, want, due)
		}
	}
	req.GiveBack = back
	if req.Want == 0 && req.Ahead == 0 && req.GiveBack == 0 && len(h.fl.done) == 0 {
		return
	}
	h.fl.done, h.fl.asking = nil, true
	d.fleetAsk(h, req)
}

func (d *Dispatcher) applyGrant(h *host, g fleet.Grant, req fleet.Request, now time.Time) {
	h.fl.last, h.fl.lastAt = g, now
	if d.fleetDegraded {
		// Redis answered this ask, but the heartbeat has not said the fleet
		// is shared again: use nothing, the leases expire.
		return
	}
	h.fl.grants = append(h.fl.grants, g.Leases...)
	d.gotTokens(h, g, req, now)
	switch {
	case req.Ahead > 0 && g.Tokens == 0 && len(g.Leases) == 0 && (g.Wait <= 0 || g.Poll):
		// Not even a token ahead (and no time known): not again at once.
		h.fl.retryAt = now.Add(fleetPoll(g, g.Rate))
	case len(g.Leases) >= req.Want && (req.Ahead == 0 || g.Tokens > 0):
		h.fl.retryAt = time.Time{}
	case g.Poll:
		h.fl.retryAt = now.Add(fleetPoll(g, g.Rate))
	default:
		h.fl.retryAt = now.Add(g.Wait)
	}
	// A pause on another replica is this replica's too; a resume is
	// learned by syncPauses, which tells it from a pause Redis lost.
	if g.Paused && !h.pace.Paused() {
		d.learnPause(h)
	}
}

// fleetReleased records a finished attempt for the fleet.
func (d *Dispatcher) fleetReleased(h *host, lease string, r pacer.Result, now time.Time) {
	if d.opts.Fleet == nil {
		return
	}
	if lease == "" {
		h.fl.unleased--
		if h.fl.unleased == 0 && !d.fleetDegraded {
			h.pace.SetLimits(h.limits(), now) // back to shared limits
		}
		return
	}
	keep := d.keepLease(h, r, now)
	if keep {
		h.fl.carry = append(h.fl.carry, lease)
	}
	h.fl.done = append(h.fl.done, fleet.Release{Lease: lease, Outcome: r.Outcome,
		RetryAfter: r.RetryAfter, HasRetry: r.HasRetry, Age: now.Sub(r.SentAt), Keep: keep})
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
			h.fl.grants, h.fl.retryAt = nil, time.Time{}
			h.fl.carry, h.fl.tokens = nil, 0 // the leases expire; the tokens are spent
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
	g := h.fl.last
	if h.fl.lastAt.IsZero() {
		return
	}
	hs.FleetInFlight = &g.InFlight
	if g.HeldFor > 0 {
		if until := h.fl.lastAt.Add(g.HeldFor); until.After(now) && hs.HeldUntil == nil {
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
		rel := h.fl.done
		for _, l := range append(h.fl.grants, h.fl.carry...) {
			rel = append(rel, fleet.Release{Lease: l, Outcome: pacer.NoSend})
		}
		back := h.fl.tokens
		h.fl.done, h.fl.grants, h.fl.carry, h.fl.tokens = nil, nil, nil, 0
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

package fleet

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/pacer"
)

// Gates are the dispatcher's gates (deliver.Gates) when replicas share
// hosts' limits: a host sends only with a lease granted by the shared
// limits in Redis. Asking is a network call, so it runs on one asker
// goroutine, which sends the asks of every host that has one queued in
// one round trip (gateask.go) and then wakes those hosts; a host has one
// ask under way at a time, and attempts that finished meanwhile are
// reported with its next ask. A host with a backlog keeps the leases of
// its successful attempts for its next sends, with tokens taken ahead
// (Host), so that its slots need not wait for a round trip. While Redis
// does not answer, hosts pace alone on their pacer.Host with their share
// of the limits (Share), and attempts started so ("unleased") keep the
// host on its share until Redis counts them: once Redis answers again, a
// host starts none more on its share, and its next ask makes those out
// leases, counted toward the cap until they end (see also heartbeat.lua:
// the fleet goes back to shared limits when every replica has).
//
// One mutex guards the gates. The dispatcher calls a gate with its own
// lock held, so the gates never call the dispatcher (wake, paused) with
// theirs held. What the gates learn on their own (answers, the limiter's
// state) they apply through wake, with the dispatcher's lock held, as
// the previous owner of this protocol did: a pump never sees a grant
// arrive between its Acquire and its Pumped, which would give the grant
// back unused.
type Gates struct {
	lim *Limiter
	log *slog.Logger

	wake   func(apply func() []string)
	paused func(host string, paused bool)

	mu       sync.Mutex
	hosts    map[string]*gate
	degraded bool // Redis does not answer: every host paces on its share
	// returning: degraded, but Redis answers; no attempt starts on a
	// share, those out are counted in Redis, until the fleet rejoins.
	returning bool
	live      int // live replicas, for the share
	index     int // this replica's index among them, for the share
	stopping  bool
	asks      asks
	pauses    pauseSync // gatepause.go
	wg        sync.WaitGroup
	// tokensFor is how long tokens taken ahead may be used (TokensFor;
	// tests set more or less).
	tokensFor time.Duration
}

var _ deliver.Gates = (*Gates)(nil)

// NewGates returns the gates that share limits through l.
func NewGates(l *Limiter, log *slog.Logger) *Gates {
	if log == nil {
		log = slog.Default()
	}
	gs := &Gates{lim: l, log: log, hosts: map[string]*gate{}, tokensFor: TokensFor}
	gs.degraded, _, _ = l.State()
	gs.live, gs.index = l.ShareOf()
	return gs
}

// Bind implements deliver.Gates.
func (gs *Gates) Bind(wake func(apply func() []string), paused func(host string, paused bool)) {
	gs.wake, gs.paused = wake, paused
	gs.lim.OnChange(gs.changed)
	gs.lim.countUncounted(gs.uncounted)
}

// uncounted is how many attempts started on a share are out and not
// counted in Redis, over all hosts.
func (gs *Gates) uncounted() int {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	n := 0
	for _, g := range gs.hosts {
		n += g.fl.Uncounted()
	}
	return n
}

// Gate implements deliver.Gates.
func (gs *Gates) Gate(name string, l pacer.Limits, now time.Time, b deliver.Backlog) deliver.Gate {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := &gate{gs: gs, name: name, lim: l, backlog: b, slot: gs.lim.slotOf(name), degraded: gs.lim.HostDegraded(name)}
	g.pace = pacer.New(g.limits(), now)
	gs.hosts[name] = g
	return g
}

// Status implements deliver.Gates.
func (gs *Gates) Status() *deliver.FleetStatus {
	degraded, live, why := gs.lim.State()
	st := &deliver.FleetStatus{Replica: gs.lim.Replica(), Live: live, Degraded: degraded, State: "shared", Error: why}
	if degraded {
		st.State = fmt.Sprintf("degraded: local share 1/%d", live)
	} else if n, slotErr := gs.lim.SlotsDown(); n > 0 {
		gs.mu.Lock()
		var hosts []string
		for name, g := range gs.hosts {
			if g.degraded {
				hosts = append(hosts, name)
			}
		}
		gs.mu.Unlock()
		st.State, st.Error = gs.lim.slotsState(hosts), slotErr
	}
	return st
}

// changed applies the limiter's state (degraded or shared, as a whole or
// per host on a Cluster, live replicas) to every host. It is the
// limiter's OnChange callback.
func (gs *Gates) changed() {
	gs.wake(func() []string {
		// The state as it is when applied, not when the change was
		// told: two changes told at once (an ask failing, a heartbeat
		// answered) may be applied in either order, and the last
		// applied must be the limiter's state now.
		degraded, _, _ := gs.lim.State()
		live, index := gs.lim.ShareOf()
		returning := gs.lim.Returning()
		isDegraded := gs.lim.degradedNow()
		gs.mu.Lock()
		defer gs.mu.Unlock()
		gs.degraded, gs.live, gs.index, gs.returning = degraded, live, index, returning
		now := time.Now()
		names := make([]string, 0, len(gs.hosts))
		for name, g := range gs.hosts {
			was := g.degraded
			g.degraded = isDegraded(g.slot)
			g.pace.SetLimits(g.limits(), now)
			if g.degraded && !was {
				g.pace.Drain(now)
				g.fl.Degraded() // the leases expire; the tokens are spent
			}
			if g.counts() {
				g.ask(now)
			}
			names = append(names, name)
		}
		return names
	})
}

// Stop implements deliver.Gates: it waits for the ask and the pause sync
// under way, then gives back the leases of finished attempts and unused
// grants, so that the other replicas need not wait for them to expire; it
// gives up after 2 s (they expire anyway).
func (gs *Gates) Stop() {
	gs.mu.Lock()
	gs.stopping = true
	if gs.pauses.timer != nil {
		gs.pauses.timer.Stop()
	}
	gs.mu.Unlock()
	gs.wg.Wait()
	gs.flush()
}

// gate is one host's deliver.Gate: its pacer (which paces alone on the
// host's share while Redis does not answer, and keeps the host's local
// state: pause, in flight, breaker) and its side of the fleet's protocol.
type gate struct {
	gs      *Gates
	name    string
	lim     pacer.Limits // the host's limits, all replicas together
	pace    *pacer.Host
	fl      Host
	backlog deliver.Backlog
	renew   map[string]*renewal // leases of attempts in flight, kept alive
	// degraded: the host paces on its share, the whole limiter being
	// degraded or (on a Cluster) the host's slot not answering.
	degraded bool
	slot     int // its keys' Cluster slot, -1 off a Cluster
}

// shared reports whether g paces on the fleet's shared limits now.
func (g *gate) shared() bool { return !g.degraded && g.fl.Uncounted() == 0 }

// answers reports whether Redis answers for g: shared, or degraded and
// returning.
func (g *gate) answers() bool { return !g.degraded || g.gs.returning }

// counts reports whether g's next ask is to have Redis count attempts
// started on its share: some are out uncounted, and Redis answers.
func (g *gate) counts() bool { return g.answers() && g.fl.Uncounted() > 0 }

// limits is what g's own pacer enforces: all of the host's limits, or the
// replica's share of them while the fleet is degraded (or attempts
// started then are still running uncounted in Redis).
func (g *gate) limits() pacer.Limits {
	if g.degraded || g.fl.Uncounted() > 0 {
		return Share(g.lim, g.gs.live, g.gs.index)
	}
	return g.lim
}

// Acquire takes a send slot: from the fleet when shared, else from the
// pacer. lease is "" for a slot not counted in Redis.
func (g *gate) Acquire(now time.Time) (ok bool, wake time.Time, lease string) {
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	if !g.shared() {
		if g.answers() {
			// Redis answers again: none more starts on the share (Redis
			// would not count it, and a host with a backlog would
			// otherwise never be without one), those out are counted by
			// the host's next ask, and the host asks the fleet once they
			// are and the fleet rejoins. That answer, or the rejoin,
			// pumps the host.
			if g.counts() {
				g.ask(now)
			}
			return false, time.Time{}, ""
		}
		if g.limits().Concurrency == 0 {
			// A share of no slots (the cap is smaller than the live
			// replicas): the rejoin, or a change of live replicas,
			// pumps the host.
			return false, time.Time{}, ""
		}
		ok, wake = g.pace.Acquire(now)
		if ok {
			g.fl.StartUnleased()
		}
		return ok, wake, ""
	}
	ready, carry, retry := g.fl.Ready(now)
	if !ready {
		if g.pace.Paused() {
			return false, time.Time{}, "" // a resume pumps the host
		}
		if now.Before(retry) {
			return false, retry, ""
		}
		g.ask(now)
		return false, time.Time{}, "" // the answer wakes the host
	}
	if ok, wake = g.pace.Take(now); !ok {
		return false, wake, ""
	}
	lease = g.fl.Use(carry)
	g.keepAlive(lease)
	return true, time.Time{}, lease
}

// Pumped gives back leases the host could not use and reports finished
// attempts that no ask for more will carry.
func (g *gate) Pumped(now time.Time) {
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	if g.gs.stopping {
		return
	}
	if g.fl.Pumped(now, func() bool { return g.backlog.Empty(now) }) {
		g.ask(now)
	}
}

// Release records a finished attempt in the pacer and for the fleet.
func (g *gate) Release(now time.Time, lease string, r pacer.Result) pacer.Hold {
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	hold := g.pace.Release(now, r)
	if lease == "" {
		if counted := g.fl.Released(now, "", r, false); counted != "" {
			g.letExpire(counted)
		}
		if g.fl.Uncounted() == 0 && !g.degraded {
			g.pace.SetLimits(g.lim, now) // back to shared limits
		}
		return hold
	}
	g.letExpire(lease)
	keep := g.fl.Keep(r, g.shared(), g.lim, g.gs.live, func() int { return g.backlog.Due(now) })
	g.fl.Released(now, lease, r, keep)
	return hold
}

// SetLimits applies the host's limits, all replicas together.
func (g *gate) SetLimits(l pacer.Limits, now time.Time) {
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	g.lim = l
	g.pace.SetLimits(g.limits(), now)
}

// Quota holds the host while the partner's quota is used up, at every
// replica: the hold goes with the next ask like a 429's (see ask.lua).
func (g *gate) Quota(now time.Time, remaining int64, reset time.Time) bool {
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	if !g.pace.Quota(now, remaining, reset) {
		return false
	}
	g.fl.QuotaHeld(g.pace.State(now).HeldUntil.Sub(now))
	return true
}

// Pause pauses the host's pacer, and makes sure the fleet is asked about
// it from time to time (gatepause.go).
func (g *gate) Pause() {
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	g.pace.Pause()
	g.gs.armPauseSync()
}

func (g *gate) Resume() {
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	g.pace.Resume()
}

func (g *gate) Paused() bool {
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	return g.pace.Paused()
}

func (g *gate) InFlight() int {
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	return g.pace.InFlight()
}

func (g *gate) Breaker() (string, time.Time) {
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	return g.pace.Breaker()
}

func (g *gate) State(now time.Time) pacer.State {
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	return g.pace.State(now)
}

// Idle reports whether the host holds nothing: its pacer is as good as
// new and it has nothing the fleet must hear of.
func (g *gate) Idle(now time.Time) bool {
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	return g.pace.Idle(now) && !g.fl.Busy() && len(g.renew) == 0
}

// Close forgets the host.
func (g *gate) Close() {
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	if g.gs.hosts[g.name] == g {
		delete(g.gs.hosts, g.name)
	}
}

// Status adds the fleet's view of the host.
func (g *gate) Status(now time.Time, hs *deliver.HostStatus) {
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	if !g.shared() {
		hs.Fleet = fmt.Sprintf("degraded: local share 1/%d", g.gs.live)
		return
	}
	hs.Fleet = "shared"
	last, lastAt := g.fl.Last()
	if lastAt.IsZero() {
		return
	}
	hs.FleetInFlight = &last.InFlight
	if last.HeldFor > 0 {
		if until := lastAt.Add(last.HeldFor); until.After(now) && hs.HeldUntil == nil {
			u := until.UTC()
			hs.HeldUntil, hs.HoldReason = &u, last.Reason
		}
	}
	if last.Breaker != "" && last.Breaker != pacer.BreakerClosed && hs.Breaker == pacer.BreakerClosed {
		hs.Breaker = last.Breaker
	}
	hs.Rate = min(hs.Rate, last.Rate)
}

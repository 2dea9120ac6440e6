package deliver

import (
	"math"
	"time"

	"github.com/hookpace/hookpace/pacer"
)

// Gate decides, for one host, whether it may send now and what each
// attempt's result does to it: the token bucket, the concurrency cap,
// holds, the breaker and pauses. The dispatcher schedules and sends; it
// asks the gate. A host paces alone on a pacer.Host (localGate); with
// Options.Gates, the gates share hosts' limits with other replicas
// (package fleet).
//
// The dispatcher calls a host's gate with its lock held, one call at a
// time, and a gate's state changes only then: what a gate learns on its
// own (an answer from other replicas) it applies through the wake
// function given to Gates.Bind, under the same lock. So a gate may be
// asynchronous: Acquire may answer "not now, I will wake you", and the
// dispatcher's view of the gate never changes in the middle of a pump.
type Gate interface {
	// Acquire takes a send slot. lease names it for Release ("" if the
	// gate needs no name). Without a slot, wake is when to try again;
	// zero if something will pump the host: an attempt's end, a resume,
	// or the gate's own wake call.
	Acquire(now time.Time) (ok bool, wake time.Time, lease string)
	// Release gives back the slot of an attempt that ended with r, and
	// returns the hold it caused.
	Release(now time.Time, lease string, r pacer.Result) pacer.Hold
	// Pumped is called each time the dispatcher has started every send
	// the gate allowed.
	Pumped(now time.Time)
	// SetLimits applies the host's limits (a reload, a learned partner
	// limit); the gate may enforce less (a share of them).
	SetLimits(l pacer.Limits, now time.Time)
	// Quota applies the partner's remaining quota; see pacer.Host.Quota.
	Quota(now time.Time, remaining int64, reset time.Time) (held bool)
	Pause()
	Resume()
	Paused() bool
	InFlight() int
	Breaker() (state string, probeAt time.Time)
	State(now time.Time) pacer.State
	// Idle reports whether the gate holds nothing a fresh one would not:
	// the dispatcher may then forget the host (and Close its gate).
	Idle(now time.Time) bool
	// Status adds to hs what the gate knows beyond State.
	Status(now time.Time, hs *HostStatus)
	// Close is called when the dispatcher forgets the host.
	Close()
}

// Gates makes the hosts' gates when their limits are shared; *fleet.Gates
// is the real one. nil (in Options) means every host paces alone.
type Gates interface {
	// Bind gives the gates, once, before any Gate call, what they may ask
	// of the dispatcher. Both are called from the gates' own goroutines,
	// never with a lock of theirs held. wake runs apply with the
	// dispatcher's lock held, then pumps the hosts apply names at once
	// (an answer came; the gates' state changed). paused records a pause
	// or resume made by another replica as this replica's own (durably).
	Bind(wake func(apply func() (hosts []string)), paused func(host string, paused bool))
	// Gate makes host's gate, with the host's limits l. b is the host's
	// queue, which the gate may look at during its calls.
	Gate(host string, l pacer.Limits, now time.Time, b Backlog) Gate
	// Tell makes a pause or resume made on this replica the other
	// replicas' too, and reports whether they could be told.
	Tell(host string, paused bool) bool
	// Status is what operators see of the gates (GET /v1/hosts).
	Status() *FleetStatus
	// Stop gives back what the gates hold, once the dispatcher's last
	// attempt has ended.
	Stop()
}

// Backlog is what a gate may ask of its host's queue, during a Gate call.
// A Backlog method never calls the Gate: a gate asks it with its own lock
// held.
type Backlog interface {
	// Due is how many sends the host could start now: its ready messages
	// (a batch is one send) and its retries that are due.
	Due(now time.Time) int
	// Empty reports whether the host has nothing it could send now.
	Empty(now time.Time) bool
}

// FleetStatus is what operators see of the replicas that share limits
// (GET /v1/hosts).
type FleetStatus struct {
	Replica  string `json:"replica"`
	Live     int    `json:"live_replicas"`
	Degraded bool   `json:"degraded"`
	// State is "shared", or "degraded: local share 1/N" while the shared
	// state can't be reached.
	State string `json:"state"`
	Error string `json:"error,omitempty"`
}

// release gives back the gate's slot of one of h's attempts.
func (h *host) release(now time.Time, lease string, r pacer.Result) pacer.Hold {
	h.sending--
	return h.gate.Release(now, lease, r)
}

// localGate is a host pacing alone: its pacer.Host (host.pace) is its
// whole gate. A host at rest has none (see rest): what reads the gate
// then sees a pacer revived with the host's limits, and the first call
// that changes it revives one. A reload's limits reach a resting host
// when it is revived, as they would reach a host forgotten and made
// again.
type localGate host

var _ Gate = (*localGate)(nil)

// paced is g's pacer, revived if g is at rest.
func (g *localGate) paced(now time.Time) *pacer.Host {
	if g.pace == nil {
		g.pace = pacer.Revive((*host)(g).limits(), now, int(g.clean))
	}
	return g.pace
}

func (g *localGate) Acquire(now time.Time) (bool, time.Time, string) {
	ok, wake := g.paced(now).Acquire(now)
	return ok, wake, ""
}

func (g *localGate) Release(now time.Time, _ string, r pacer.Result) pacer.Hold {
	return g.paced(now).Release(now, r)
}

func (g *localGate) SetLimits(l pacer.Limits, now time.Time) {
	if g.pace != nil {
		g.pace.SetLimits(l, now)
	}
}

func (g *localGate) Quota(now time.Time, remaining int64, reset time.Time) bool {
	return g.paced(now).Quota(now, remaining, reset)
}

func (g *localGate) Pause()  { g.paced(time.Now()).Pause() }
func (g *localGate) Resume() { g.paced(time.Now()).Resume() }

func (g *localGate) Paused() bool { return g.pace != nil && g.pace.Paused() }

func (g *localGate) InFlight() int {
	if g.pace == nil {
		return 0
	}
	return g.pace.InFlight()
}

func (g *localGate) Breaker() (string, time.Time) {
	if g.pace == nil {
		return pacer.BreakerClosed, time.Time{}
	}
	return g.pace.Breaker()
}

func (g *localGate) State(now time.Time) pacer.State {
	if g.pace == nil {
		return pacer.RestingState((*host)(g).limits(), now, int(g.clean))
	}
	return g.pace.State(now)
}

func (g *localGate) Idle(now time.Time) bool { return g.pace == nil || g.pace.Idle(now) }

// rest drops g's pacer if it is at rest (pacer.Host.Resting), keeping
// its count of clean successes.
func (g *localGate) rest(now time.Time) {
	if g.pace == nil {
		return
	}
	if clean, ok := g.pace.Resting(now); ok {
		g.clean = int32(min(clean, math.MaxInt32))
		g.pace = nil
	}
}

func (*localGate) Pumped(time.Time)              {}
func (*localGate) Status(time.Time, *HostStatus) {}
func (*localGate) Close()                        {}

// Due implements Backlog.
func (h *host) Due(now time.Time) int {
	return h.win.Due(now)
}

// Empty implements Backlog.
func (h *host) Empty(now time.Time) bool {
	p, _ := h.next(now)
	return p.Empty()
}

// gatesWoke applies what the gates learned, and pumps the hosts it
// changed. A pending wake was computed before it.
func (d *Dispatcher) gatesWoke(apply func() []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, name := range apply() {
		h := d.hosts[name]
		if h == nil {
			continue
		}
		if h.timer != nil {
			h.timer.Stop()
			h.wakeAt = time.Time{}
		}
		d.pump(h)
	}
}

// Fleet reports the fleet's state; nil without one.
func (d *Dispatcher) Fleet() *FleetStatus {
	if d.opts.Gates == nil {
		return nil
	}
	return d.opts.Gates.Status()
}

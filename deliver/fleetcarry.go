package deliver

import (
	"time"

	"github.com/hookpace/hookpace/fleet"
	"github.com/hookpace/hookpace/pacer"
)

// Keeping leases. A host with a backlog would leave each slot idle for a
// round trip between an attempt's end and the next grant. Instead, a
// successful attempt's lease is kept (reported with Keep at the next ask,
// which renews it) and the host's next webhook goes on it with a token
// taken ahead: each ask of a host with more due than it asks leases for
// takes up to fleet.Reserve tokens without leases. Tokens held unused are
// what widens the fleet's bound, so a replica holds at most Reserve of
// them (zero for slow hosts: nothing is kept there), and only for
// tokensAheadFor after the answer that brought them, so that a hold,
// pause or breaker set by another replica stops this one within that time
// plus a round trip; unused ones are given back with the next ask, which
// then takes none ahead.

// tokensAheadFor is how long tokens taken ahead may be used.
const tokensAheadFor = 20 * time.Millisecond

// canCarry reports whether h may send on a kept lease now.
func (f *fleetHost) canCarry(now time.Time) bool {
	return len(f.carry) > 0 && f.tokens > 0 && now.Before(f.tokensBy)
}

// keepLease reports whether the lease of an attempt that ended with r is
// kept for h's next send: a success, shared limits, more due than the
// host's other slots take, and tokens ahead allowed for the host.
func (d *Dispatcher) keepLease(h *host, r pacer.Result, now time.Time) bool {
	if r.Outcome != pacer.Success || !d.shared(h) || fleet.Reserve(h.limits(), d.fleetLive) == 0 {
		return false
	}
	_, due := h.wanted(now)
	return due > len(h.fl.carry)+len(h.fl.grants)
}

// expireTokens gives back h's tokens ahead that were not used in time,
// with the kept leases that waited for them (the host goes back to plain
// leases; its next ask takes no tokens ahead, so that a replica too slow
// to use them does not take them again and again).
func (d *Dispatcher) expireTokens(h *host, now time.Time) (giveBack int, expired bool) {
	if h.fl.tokens == 0 || now.Before(h.fl.tokensBy) {
		return 0, false
	}
	giveBack, h.fl.tokens = h.fl.tokens, 0
	d.releaseCarry(h)
	return giveBack, true
}

// tokensAhead is how many tokens h's next ask takes ahead, and how many it
// gives back (not needed: no more due than the ask's leases).
func (d *Dispatcher) tokensAhead(h *host, want, due int) (ahead, giveBack int) {
	if due <= want {
		giveBack, h.fl.tokens = h.fl.tokens, 0
		return 0, giveBack
	}
	room := fleet.Reserve(h.limits(), d.fleetLive) - h.fl.tokens
	// Only as many as leases may come free for them: those kept, those of
	// attempts in flight and those this ask takes.
	return max(min(room, due-want, len(h.fl.carry)+h.pace.InFlight()+want), 0), 0
}

// gotTokens applies an answer's tokens ahead. An answer that says the
// host may not send (paused, held, breaker not closed) ends keeping: the
// kept leases are given back and the tokens in hand expire now (the next
// ask gives them back); so does an answer to an ask for tokens ahead that
// brought neither leases nor tokens (the bucket is empty).
func (d *Dispatcher) gotTokens(h *host, g fleet.Grant, req fleet.Request, now time.Time) {
	if g.Paused || g.HeldFor > 0 || g.Breaker != "" && g.Breaker != pacer.BreakerClosed {
		h.fl.tokensBy = now
		d.releaseCarry(h)
		return
	}
	if g.Tokens > 0 {
		h.fl.tokens += g.Tokens
		h.fl.tokensBy = now.Add(d.asks.tokensFor)
		return
	}
	if req.Ahead > 0 && len(g.Leases) == 0 {
		d.releaseCarry(h)
	}
}

// dropCarry gives back, after a pump, the kept leases that no ask under
// way is bringing tokens for, or that have tokens but nothing due (or a
// closed gate) to send. It reports whether tokens ahead are left with
// nothing due: the next ask gives them back.
func (d *Dispatcher) dropCarry(h *host, now time.Time) (giveBack bool) {
	if len(h.fl.carry) == 0 && h.fl.tokens == 0 {
		return false
	}
	p, _, _ := h.next(now)
	nothing := p.empty()
	if len(h.fl.carry) > 0 && (nothing || !h.fl.asking || h.fl.canCarry(now)) {
		d.releaseCarry(h)
	}
	return nothing && h.fl.tokens > 0
}

func (d *Dispatcher) releaseCarry(h *host) {
	for _, l := range h.fl.carry {
		h.fl.done = append(h.fl.done, fleet.Release{Lease: l, Outcome: pacer.NoSend})
	}
	h.fl.carry = h.fl.carry[:0]
}

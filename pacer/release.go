package pacer

import (
	"math"
	"time"
)

// Hold is what Release reports about a 429.
type Hold struct {
	Until  time.Time
	Capped bool // Retry-After was longer than max_retry_after
	Asked  time.Duration
}

// Release returns the slot taken by Acquire and applies what the attempt
// learned about the host.
func (h *Host) Release(now time.Time, r Result) (hold Hold) {
	h.inFlight = max(h.inFlight-1, 0)
	probe := h.probing
	h.probing = false
	switch r.Outcome {
	case Success:
		if h.ep != nil {
			h.ep.c429 = 0
		}
		h.clean = min(h.clean+1, cleanMax)
		h.closeBreaker()
		h.increase(now)
		if h.auto != nil {
			h.auto.sample(now, r.SentAt)
		}
	case Answered:
		h.closeBreaker()
		if h.auto != nil {
			h.auto.sample(now, r.SentAt)
		}
	case Throttled:
		h.streak = 0
		h.closeBreaker() // a 429 proves the host is up; it never trips the breaker
		hold = h.throttle(now, r)
	case Failure:
		h.streak = 0
		if h.auto != nil {
			h.auto.failed(now, r.SentAt, failureCause(r.Status))
		}
		if h.breaker == BreakerOpen {
			break // a straggler sent before the breaker opened
		}
		h.failures++
		if probe || h.failures >= h.lim.BreakerFailures {
			h.breaker = BreakerOpen
			h.w().openUntil = now.Add(h.lim.BreakerCooldown)
		}
	case NoSend:
		// The host was never contacted: nothing learned.
	case Unresolved:
		return h.unresolved(now, r, HoldDNS)
	case AuthFailed:
		return h.unresolved(now, r, HoldAuth)
	}
	if r.Outcome != NoSend && h.ep != nil {
		h.ep.cDNS = 0 // the name resolved
	}
	return hold
}

// Breaker reports the breaker's state as it stands (an open breaker turns
// half-open when Acquire sends the probe), and while it is open, when the
// probe may go.
func (h *Host) Breaker() (state string, probeAt time.Time) {
	if h.breaker == BreakerOpen {
		return h.breaker, h.r().openUntil
	}
	return h.breaker, time.Time{}
}

func (h *Host) closeBreaker() {
	h.failures = 0
	h.breaker = BreakerClosed
}

// throttle starts (or extends) a holding pattern. Attempts sent before the
// current hold began are stragglers of the same episode: they may lengthen
// the hold to their Retry-After but neither escalate it nor lower the rate
// again, so a burst of in-flight 429s counts once.
func (h *Host) throttle(now time.Time, r Result) Hold {
	e := h.w()
	straggler := !e.holdStart.IsZero() && r.SentAt.Before(e.holdStart)
	var d time.Duration
	var hold Hold
	switch {
	case r.HasRetry:
		d = r.RetryAfter
		if d > h.lim.MaxRetryAfter {
			hold.Capped, hold.Asked = true, d
			d = h.lim.MaxRetryAfter
		}
		e.holdReason = "429 Retry-After"
	case straggler:
		d = 0
	default:
		d = h.lim.HoldSchedule[min(e.c429, len(h.lim.HoldSchedule)-1)]
		e.holdReason = "429"
	}
	until := now.Add(d)
	if !straggler {
		e.c429++
		e.holdStart = now
		h.cutRate(now)
	}
	if until.After(e.heldUntil) {
		e.heldUntil = until
		// Gentle resume: the bucket restarts at the end of the hold with
		// one token, for the held message, and refills at the rate.
		h.tokens, h.last = 1, until
	}
	hold.Until = e.heldUntil
	return hold
}

// increase is the additive half of AIMD: every streak of successes raises
// the rate by a share of the configured rate, up to it.
func (h *Host) increase(now time.Time) {
	if !h.lim.Adaptive || h.rate >= h.lim.Rate {
		h.streak = 0
		return
	}
	h.streak++
	if h.streak < h.streakLen() {
		return
	}
	h.streak = 0
	h.refill(now)
	h.rate = math.Min(h.lim.Rate, h.rate+h.lim.Rate*increaseShare)
}

// Hold reasons of a host that cannot be sent to for a while, though
// nothing failed at the host.
const (
	HoldDNS  = "dns"  // its name does not resolve
	HoldAuth = "auth" // its credentials could not be had: the token endpoint failed
)

// unresolved holds a host whose name did not resolve (NXDOMAIN), or whose
// credentials could not be had (reason says which), as a 429
// without a Retry-After would, by hold_schedule and escalating with each
// episode, so that its queue waits for the name instead of spending
// attempts on it. Nothing failed at the host: the rate is not lowered and
// the breaker does not count it. Attempts sent before the current hold
// began are stragglers of the same episode and do not escalate it.
func (h *Host) unresolved(now time.Time, r Result, reason string) Hold {
	e := h.w()
	if straggler := !e.holdStart.IsZero() && r.SentAt.Before(e.holdStart); !straggler {
		until := now.Add(h.lim.HoldSchedule[min(e.cDNS, len(h.lim.HoldSchedule)-1)])
		e.cDNS++
		e.holdStart = now
		if until.After(e.heldUntil) {
			e.heldUntil, e.holdReason = until, reason
			h.tokens, h.last = 1, until // one token for the held message at the end
		}
	}
	return Hold{Until: e.heldUntil}
}

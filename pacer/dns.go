package pacer

import "time"

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

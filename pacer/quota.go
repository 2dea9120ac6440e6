package pacer

import "time"

// What a partner says of its quota in its answers (RateLimit,
// X-RateLimit-Remaining...): how many more requests it takes before its
// window resets. The host keeps that budget, less the attempts already in
// flight, and spends one per send; with nothing left it is held until the
// reset, the hold shown as "quota". Unlike a 429 hold, nothing failed: the
// rate is not lowered and the 429 schedule does not escalate.

// HoldQuota is the hold reason of a quota hold.
const HoldQuota = "quota"

// Quota records that, as of an answer at now, the partner takes remaining
// more requests until reset. Attempts in flight are counted against it.
// It reports whether the host is now held until reset.
//
// Partners round a delta reset up to whole seconds, so each answer's reset
// is an upper bound, up to a second late. Answers from one window (the
// remaining count not going up) keep the earliest bound, which is the
// tightest: a window of 1 s exhausted late would otherwise be held for
// nearly a second more.
func (h *Host) Quota(now time.Time, remaining int64, reset time.Time) (held bool) {
	if !reset.After(now) {
		if h.ep != nil {
			h.ep.quotaUntil = time.Time{}
		}
		return false
	}
	e := h.w()
	if e.quotaUntil.After(now) && remaining <= e.quotaRem && reset.After(e.quotaUntil) {
		reset = e.quotaUntil
	}
	e.quotaUntil, e.quotaRem = reset, remaining
	e.quotaLeft = remaining - int64(h.inFlight)
	if e.quotaLeft > 0 {
		return false
	}
	return h.quotaHold(now, reset)
}

// spend takes one send from a known budget, holding the host when it is
// used up.
func (h *Host) spend(now time.Time) {
	e := h.w()
	if !now.Before(e.quotaUntil) {
		e.quotaUntil = time.Time{}
		return
	}
	e.quotaLeft--
	if e.quotaLeft <= 0 {
		h.quotaHold(now, e.quotaUntil)
	}
}

// quotaHold holds the host until the partner's window resets. The bucket
// does not fill while held: sends resume at the rate, not in a burst on
// top of what the new window will take.
func (h *Host) quotaHold(now, until time.Time) bool {
	e := h.w()
	if !until.After(e.heldUntil) {
		return now.Before(e.heldUntil)
	}
	h.refill(now)
	e.heldUntil, e.holdReason = until, HoldQuota
	h.last = until
	return true
}

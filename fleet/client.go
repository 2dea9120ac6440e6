package fleet

import (
	"time"

	"github.com/hookpace/hookpace/pacer"
)

// Host is one host's side of the fleet's protocol on one replica: the
// leases granted and not used yet, the leases kept from successful
// attempts with the tokens taken ahead for them, the finished attempts
// not reported yet, and when to ask again. It decides what each ask
// carries and what each answer means; its owner sends the asks (in
// batches, with Limiter.AskMany) and says what is due. Like pacer.Host,
// it never reads the clock, and it is not safe for concurrent use: its
// owner serialises calls.
//
// Keeping leases. A host with a backlog would leave each slot idle for a
// round trip between an attempt's end and the next grant. Instead, a
// successful attempt's lease is kept (reported with Keep at the next ask,
// which renews it) and the host's next webhook goes on it with a token
// taken ahead: each ask of a host with more due than it asks leases for
// takes up to Reserve tokens without leases. Tokens held unused are what
// widens the fleet's bound, so a replica holds at most Reserve of them
// (zero for slow hosts: nothing is kept there), and only for TokensFor
// after the answer that brought them, so that a hold, pause or breaker
// set by another replica stops this one within that time plus a round
// trip; unused ones are given back with the next ask, which then takes
// none ahead.
type Host struct {
	asking   bool
	grants   []string  // leases granted and not used yet
	carry    []string  // leases kept from successful attempts, for the next sends
	tokens   int       // taken ahead, for sends on carried leases
	tokensBy time.Time // ... until then; given back after
	done     []Release // finished attempts not reported yet
	unleased int       // attempts in flight started on the local share
	reg      []string  // ... and the leases Redis counts for some of them
	retryAt  time.Time // do not ask for more before (zero: whenever needed)
	last     Grant     // the last answer, for operators
	lastAt   time.Time
}

// TokensFor is how long tokens taken ahead may be used.
const TokensFor = 20 * time.Millisecond

// Busy reports whether h holds anything the fleet must hear of: an ask
// under way, leases, tokens, unreported attempts or attempts started on
// the local share.
func (h *Host) Busy() bool {
	return h.asking || len(h.grants) > 0 || len(h.carry) > 0 || h.tokens > 0 || len(h.done) > 0 || h.unleased > 0
}

// Asking reports whether an ask is under way (until Answered).
func (h *Host) Asking() bool { return h.asking }

// Poll is how often a host asks again when no time is known: slots taken
// by other replicas are looked for at about the host's rate, a pause
// elsewhere every second.
func Poll(g Grant, rate float64) time.Duration {
	if g.Paused {
		return time.Second
	}
	return min(max(time.Duration(float64(time.Second)/max(rate, 1)), 10*time.Millisecond), 250*time.Millisecond)
}

// canCarry reports whether h may send on a kept lease now.
func (h *Host) canCarry(now time.Time) bool {
	return len(h.carry) > 0 && h.tokens > 0 && now.Before(h.tokensBy)
}

// Ready reports whether h has a lease for a send now: a granted one, or a
// kept one with a token taken ahead (carry). Without one, retry is when
// an ask may bring one (zero: at once).
func (h *Host) Ready(now time.Time) (ok, carry bool, retry time.Time) {
	if len(h.grants) > 0 {
		return true, false, time.Time{}
	}
	if h.canCarry(now) {
		return true, true, time.Time{}
	}
	return false, false, h.retryAt
}

// Use takes the lease Ready offered.
func (h *Host) Use(carry bool) (lease string) {
	if carry {
		h.tokens--
		lease = h.carry[len(h.carry)-1]
		h.carry = h.carry[:len(h.carry)-1]
		return lease
	}
	lease = h.grants[0]
	h.grants = h.grants[1:]
	return lease
}

// Want is how many sends to ask leases for, of due ones: at most the
// concurrency left beside the attempts in flight and the leases kept.
func (h *Host) Want(due, concurrency, inFlight int) int {
	return min(due, max(concurrency-inFlight-len(h.carry), 0))
}

// Need describes what h's owner would send now, for Ask.
type Need struct {
	Host     string
	Limits   pacer.Limits
	Live     int  // live replicas
	Shared   bool // pacing on the fleet's limits (not degraded, nothing unleased)
	Paused   bool // paused here: ask for nothing
	Due      int  // sends due now
	InFlight int  // attempts in flight
	// Slots is the most attempts this replica may have in flight now (its
	// adaptive limit with concurrency: auto), 0 for Limits.Concurrency.
	// Leases are asked for within it; the limit Redis counts stays the
	// host's whole concurrency.
	Slots int
	// Count: Redis answers, so the ask has the attempts started on the
	// local share and not counted yet made leases (Request.Unleased).
	Count bool
}

// Ask is the request h's next ask sends (carrying its finished attempts),
// or false when there is nothing to ask or an ask is under way. A request
// returned is under way until Answered.
func (h *Host) Ask(now time.Time, n Need) (Request, bool) {
	if h.asking {
		return Request{}, false
	}
	req := Request{Host: n.Host, Limits: n.Limits}
	back, expired := h.expireTokens(now) // before Releases: it may give kept leases back
	req.Releases = h.done
	if n.Shared {
		conc := n.Limits.Concurrency
		if n.Slots > 0 {
			conc = min(conc, n.Slots)
		}
		want, due := h.Want(n.Due, conc, n.InFlight), n.Due
		if now.Before(h.retryAt) || n.Paused {
			want, due = 0, 0 // the bucket is empty, or paused: no token ahead either
		}
		req.Want = want
		if !expired {
			req.Ahead, back = h.tokensAhead(n, want, due)
		}
	}
	req.GiveBack = back
	if n.Count {
		req.Unleased = h.Uncounted()
	}
	if req.Want == 0 && req.Ahead == 0 && req.GiveBack == 0 && req.Unleased == 0 && len(h.done) == 0 {
		return Request{}, false
	}
	h.done, h.asking = nil, true
	return req, true
}

// Answered ends the ask under way. g is its answer, nil if Redis did not
// answer (the limiter is then degraded; unreported leases expire), and
// degraded says that the limiter is still degraded all the same: nothing
// granted is used then, and the leases expire. It returns the leases
// Redis now counts for attempts started on the local share (to renew while
// they run), degraded or not.
func (h *Host) Answered(now time.Time, req Request, g *Grant, degraded bool, tokensFor time.Duration) (counted []string) {
	h.asking = false
	if g == nil {
		return nil
	}
	counted = h.count(g.Registered)
	h.last, h.lastAt = *g, now
	if degraded {
		return counted
	}
	h.grants = append(h.grants, g.Leases...)
	h.gotTokens(*g, req, now, tokensFor)
	switch {
	case req.Ahead > 0 && g.Tokens == 0 && len(g.Leases) == 0 && (g.Wait <= 0 || g.Poll):
		// Not even a token ahead (and no time known): not again at once.
		h.retryAt = now.Add(Poll(*g, g.Rate))
	case len(g.Leases) >= req.Want && (req.Ahead == 0 || g.Tokens > 0):
		h.retryAt = time.Time{}
	case g.Poll:
		h.retryAt = now.Add(Poll(*g, g.Rate))
	default:
		h.retryAt = now.Add(g.Wait)
	}
	return counted
}

// count takes the leases Redis made for attempts started on the local
// share, as many as are still out; the others (their attempts ended while
// the ask was under way) go back with the next ask.
func (h *Host) count(ids []string) []string {
	n := min(len(ids), h.Uncounted())
	h.reg = append(h.reg, ids[:n]...)
	for _, l := range ids[n:] {
		h.done = append(h.done, Release{Lease: l, Outcome: pacer.NoSend})
	}
	return ids[:n]
}

// Last is the last answer and when it came (zero: none yet).
func (h *Host) Last() (Grant, time.Time) { return h.last, h.lastAt }

// StartUnleased counts an attempt started on the local share.
func (h *Host) StartUnleased() { h.unleased++ }

// Unleased is the number of attempts in flight started on the local
// share.
func (h *Host) Unleased() int { return h.unleased }

// Uncounted is the number of attempts in flight started on the local share
// that Redis does not count yet: while there are any, the host stays on
// its share (the fleet's cap does not know them).
func (h *Host) Uncounted() int { return h.unleased - len(h.reg) }

// Released records a finished attempt: one started on the local share
// (lease ""), or one on a lease, which is kept for the next send when
// keep (see Keep). An attempt on the local share that Redis counts gives
// back one of the leases it counts them with (counted: to stop renewing).
func (h *Host) Released(now time.Time, lease string, r pacer.Result, keep bool) (counted string) {
	if lease == "" {
		h.unleased--
		if len(h.reg) == 0 {
			return ""
		}
		lease, h.reg, keep = h.reg[len(h.reg)-1], h.reg[:len(h.reg)-1], false
		counted = lease
	}
	if keep {
		h.carry = append(h.carry, lease)
	}
	h.done = append(h.done, Release{Lease: lease, Outcome: r.Outcome,
		RetryAfter: r.RetryAfter, HasRetry: r.HasRetry, Age: now.Sub(r.SentAt), Keep: keep})
	return counted
}

// Keep reports whether the lease of an attempt that ended with r is kept
// for the next send: a success, shared limits, tokens ahead allowed for
// the host (limits, live replicas), and more due than the leases kept and
// granted take.
func (h *Host) Keep(r pacer.Result, shared bool, lim pacer.Limits, live int, due func() int) bool {
	if r.Outcome != pacer.Success || !shared || Reserve(lim, live) == 0 {
		return false
	}
	return due() > len(h.carry)+len(h.grants)
}

// QuotaHeld reports, with the next ask, that the partner's quota is used
// up for d: the host is held that long at every replica.
func (h *Host) QuotaHeld(d time.Duration) {
	h.done = append(h.done, Release{Outcome: pacer.NoSend, RetryAfter: d, HasRetry: true})
}

// Pumped gives back, after the owner started what it could, the leases
// granted and not used, and the kept leases that no ask under way is
// bringing tokens for, or that have tokens but nothing to send (nothing).
// It reports whether to ask now, to report them.
func (h *Host) Pumped(now time.Time, nothing func() bool) (ask bool) {
	for _, l := range h.grants {
		h.done = append(h.done, Release{Lease: l, Outcome: pacer.NoSend})
	}
	h.grants = nil
	return h.dropCarry(now, nothing) || len(h.done) > 0
}

// Degraded forgets what the fleet granted: the leases expire and the
// tokens are spent.
func (h *Host) Degraded() {
	h.grants, h.retryAt = nil, time.Time{}
	h.carry, h.tokens = nil, 0
}

// Flush is what h still holds at shutdown, to give back: finished
// attempts and unused leases as releases, and the tokens taken ahead.
func (h *Host) Flush() (rel []Release, giveBack int) {
	rel = h.done
	for _, l := range append(h.grants, h.carry...) {
		rel = append(rel, Release{Lease: l, Outcome: pacer.NoSend})
	}
	giveBack = h.tokens
	h.done, h.grants, h.carry, h.tokens = nil, nil, nil, 0
	return rel, giveBack
}

// expireTokens gives back h's tokens ahead that were not used in time,
// with the kept leases that waited for them (the host goes back to plain
// leases; its next ask takes no tokens ahead, so that a replica too slow
// to use them does not take them again and again).
func (h *Host) expireTokens(now time.Time) (giveBack int, expired bool) {
	if h.tokens == 0 || now.Before(h.tokensBy) {
		return 0, false
	}
	giveBack, h.tokens = h.tokens, 0
	h.releaseCarry()
	return giveBack, true
}

// tokensAhead is how many tokens the next ask takes ahead, and how many it
// gives back (not needed: no more due than the ask's leases).
func (h *Host) tokensAhead(n Need, want, due int) (ahead, giveBack int) {
	if due <= want {
		giveBack, h.tokens = h.tokens, 0
		return 0, giveBack
	}
	room := Reserve(n.Limits, n.Live) - h.tokens
	// Only as many as leases may come free for them: those kept, those of
	// attempts in flight and those this ask takes.
	return max(min(room, due-want, len(h.carry)+n.InFlight+want), 0), 0
}

// gotTokens applies an answer's tokens ahead. An answer that says the
// host may not send (paused, held, breaker not closed) ends keeping: the
// kept leases are given back and the tokens in hand expire now (the next
// ask gives them back); so does an answer to an ask for tokens ahead that
// brought neither leases nor tokens (the bucket is empty).
func (h *Host) gotTokens(g Grant, req Request, now time.Time, tokensFor time.Duration) {
	if g.Paused || g.HeldFor > 0 || g.Breaker != "" && g.Breaker != pacer.BreakerClosed {
		h.tokensBy = now
		h.releaseCarry()
		return
	}
	if g.Tokens > 0 {
		h.tokens += g.Tokens
		h.tokensBy = now.Add(tokensFor)
		return
	}
	if req.Ahead > 0 && len(g.Leases) == 0 {
		h.releaseCarry()
	}
}

// dropCarry gives back the kept leases that no ask under way is bringing
// tokens for, or that have tokens but nothing due (or a closed gate) to
// send. It reports whether tokens ahead are left with nothing due: the
// next ask gives them back.
func (h *Host) dropCarry(now time.Time, nothingDue func() bool) (giveBack bool) {
	if len(h.carry) == 0 && h.tokens == 0 {
		return false
	}
	nothing := nothingDue()
	if len(h.carry) > 0 && (nothing || !h.asking || h.canCarry(now)) {
		h.releaseCarry()
	}
	return nothing && h.tokens > 0
}

func (h *Host) releaseCarry() {
	for _, l := range h.carry {
		h.done = append(h.done, Release{Lease: l, Outcome: pacer.NoSend})
	}
	h.carry = h.carry[:0]
}

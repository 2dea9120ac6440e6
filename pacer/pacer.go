// Package pacer decides when hookpace may send the next webhook to one
// destination host. A Host combines a token bucket (rate + burst), a
// concurrency cap, the 429 holding pattern, an adaptive (AIMD) rate and a
// circuit breaker.
//
// A Host is a plain state machine: it never reads the clock or starts a
// timer. Every method takes the current time, and Acquire says when to ask
// again, so an idle host costs nothing and tests need no sleeps. A Host is
// not safe for concurrent use; its owner serialises calls.
package pacer

import (
	"math"
	"time"
)

// Bounds of the limits a Host works with. Config refuses values outside
// them (check-config says so), and New and SetLimits clamp to them, so that
// no rate or burst can overflow the bucket's arithmetic: at 1e308/s the
// bucket's capacity overflowed, and the host stalled until a restart.
const (
	RateMax  = 1e6          // sends per second
	RateMin  = 1.0 / 36_000 // one send per ten hours
	BurstMax = 1_000_000
)

// Limits are a host's configured limits.
type Limits struct {
	Rate            float64 // sends per second
	Burst           int
	Concurrency     int     // the cap; with AutoConcurrency, the ceiling (max_concurrency)
	AutoConcurrency bool    // find the concurrency from latency and errors (adaptive.go)
	Adaptive        bool    // lower the rate on 429, raise it again on success
	MinRate         float64 // floor for the adaptive rate
	HoldSchedule    []time.Duration
	MaxRetryAfter   time.Duration
	BreakerFailures int
	BreakerCooldown time.Duration
}

// Outcome classifies a finished attempt as far as pacing is concerned.
type Outcome int

const (
	Success    Outcome = iota // 2xx
	Throttled                 // 429: hold the host
	Failure                   // 5xx, timeout, connection error: counts towards the breaker
	Answered                  // any other answer (a permanent 4xx): the host is up
	NoSend                    // nothing reached the host (refused by egress policy)
	Unresolved                // the host's name does not resolve (NXDOMAIN): hold the host (release.go)
	AuthFailed                // no credentials could be had (the token endpoint failed): hold the host (release.go)
)

// Result reports a finished attempt.
type Result struct {
	Outcome    Outcome
	RetryAfter time.Duration // from a Retry-After header
	HasRetry   bool          // RetryAfter is set
	SentAt     time.Time     // when the attempt was acquired
	// Status is the answer's HTTP status, 0 for none (a timeout, a
	// connection error) or not told: it names the cause of a cut.
	Status int
}

// Breaker states.
const (
	BreakerClosed   = "closed"
	BreakerOpen     = "open"
	BreakerHalfOpen = "half-open"
)

const (
	// headroom is the share of the rate the bucket actually refills at.
	// A receiver stamps arrivals after network and scheduling jitter, so a
	// limiter running exactly at the limit shows it one or two requests
	// over B + R·W in some window; 1% leaves ~10 ms of room per second.
	headroom = 0.99
	// jitterMargin is how much of the burst, in time at the configured
	// rate, the bucket holds back: requests that leave in a burst and then
	// at the rate can reach the receiver bunched by scheduling and network
	// delays, and at high rates 1% of headroom is only a few requests. The
	// margin never takes more than half the burst (see capacity).
	jitterMargin   = 25 * time.Millisecond
	decreaseFactor = 0.5  // multiplicative decrease per 429 episode
	increaseShare  = 0.05 // additive increase: this share of the configured rate
	minStreak      = 10   // successes per increase (at least burst)
	defaultHold    = 5 * time.Second
)

// Host is the pacing state of one destination.
type Host struct {
	lim Limits

	tokens float64
	last   time.Time // when tokens was last brought up to date
	rate   float64   // effective rate
	streak int       // successes since the last increase
	clean  int       // successes since the last 429 episode (capped)

	auto *gradient // adaptive concurrency; nil: the configured cap

	inFlight int
	paused   bool

	ep *episodes // nil until the host is first held, cut, tripped or told a quota

	breaker  string
	failures int
	probing  bool
}

// episodes is what a host remembers of holds, rate cuts, an open breaker
// and a partner's quota: most hosts never have any, so it is allocated on
// the first (Host.w) and read through Host.r, which gives the zero value
// while there is none.
type episodes struct {
	heldUntil  time.Time
	holdStart  time.Time
	holdReason string
	c429       int // consecutive 429 episodes
	cDNS       int // consecutive episodes of the name not resolving

	cut Cut // the last 429 episode that cut the rate

	quotaUntil time.Time // the partner's window resets then (zero: no budget known)
	quotaLeft  int64     // sends the partner takes before quotaUntil (see quota.go)
	quotaRem   int64     // the remaining count of the answer that set quotaUntil

	openUntil time.Time
}

// noEpisodes is what Host.r gives for a host without episodes: never
// written.
var noEpisodes episodes

// r returns the host's episodes for reading.
func (h *Host) r() *episodes {
	if h.ep == nil {
		return &noEpisodes
	}
	return h.ep
}

// w returns the host's episodes for writing, allocated on first need.
func (h *Host) w() *episodes {
	if h.ep == nil {
		h.ep = new(episodes)
	}
	return h.ep
}

// New returns a host with a full bucket.
func New(l Limits, now time.Time) *Host { return Revive(l, now, 0) }

// Revive returns a host with a full bucket that has had clean successes
// since its last 429 episode (see Resting): what a host at rest is.
func Revive(l Limits, now time.Time, clean int) *Host {
	h := new(Host)
	h.init(l, now, clean)
	return h
}

func (h *Host) init(l Limits, now time.Time, clean int) {
	l = Sanitize(l)
	*h = Host{lim: l, tokens: Capacity(l), last: now, rate: l.Rate, breaker: BreakerClosed,
		clean: min(max(clean, 0), cleanMax)}
	if l.AutoConcurrency {
		h.auto = newGradient(l.Concurrency, now)
	}
}

// Resting reports whether h holds nothing but its count of clean
// successes (returned) that Revive with h's limits would not give it,
// now and at any time after: Idle, with no episode, adaptive limit,
// failure or rate streak remembered. Such a host may be dropped and
// made again with Revive when it is next needed; between the two its
// State is RestingState's.
func (h *Host) Resting(now time.Time) (clean int, ok bool) {
	if !h.Idle(now) || h.ep != nil || h.auto != nil || h.failures > 0 ||
		h.breaker != BreakerClosed || h.probing || h.streak > 0 {
		return 0, false
	}
	return h.clean, true
}

// RestingState is the State of a host revived at now, without making one.
func RestingState(l Limits, now time.Time, clean int) State {
	var h Host
	h.init(l, now, clean)
	return h.State(now)
}

// Capacity is how many tokens the bucket holds: the burst less the jitter
// margin, R·25 ms rounded down but never more than half the burst. With
// the whole margin held back, arrivals bunched by up to 25 ms still stay
// within B + R·W at the receiver.
func Capacity(l Limits) float64 {
	margin := math.Min(math.Floor(l.Rate*jitterMargin.Seconds()), float64(l.Burst/2))
	return float64(l.Burst) - margin
}

// Sanitize fills what limits left at zero mean and clamps rate and burst to
// their bounds: what New and SetLimits apply, and what a fleet's shared
// bucket must apply alike.
func Sanitize(l Limits) Limits {
	if !(l.Rate > 0) { // also NaN
		l.Rate = 1
	}
	l.Rate = math.Min(math.Max(l.Rate, RateMin), RateMax)
	l.Burst = min(max(l.Burst, 1), BurstMax)
	l.Concurrency = max(l.Concurrency, 1)
	if !(l.MinRate > 0) || l.MinRate > l.Rate {
		l.MinRate = l.Rate / 10
	}
	l.MinRate = math.Max(l.MinRate, RateMin)
	if len(l.HoldSchedule) == 0 {
		l.HoldSchedule = []time.Duration{defaultHold}
	}
	if l.MaxRetryAfter <= 0 {
		l.MaxRetryAfter = 5 * time.Minute
	}
	l.BreakerFailures = max(l.BreakerFailures, 1)
	if l.BreakerCooldown <= 0 {
		l.BreakerCooldown = 30 * time.Second
	}
	return l
}

// SetLimits applies new limits (a config reload) and keeps the host's
// state: holds, breaker, tokens and in-flight count carry over. An adaptive
// rate that was lowered stays lowered, under the new ceiling.
func (h *Host) SetLimits(l Limits, now time.Time) {
	h.refill(now)
	l = Sanitize(l)
	if h.rate >= h.lim.Rate || !l.Adaptive {
		h.rate = l.Rate
	}
	h.rate = math.Max(math.Min(h.rate, l.Rate), l.MinRate)
	h.lim = l
	h.tokens = math.Max(0, math.Min(h.tokens, Capacity(l)))
	switch {
	case !l.AutoConcurrency:
		h.auto = nil
	case h.auto == nil:
		h.auto = newGradient(l.Concurrency, now)
	default:
		h.auto.setCeiling(l.Concurrency)
	}
}

// Acquire takes a send slot and a token if both are available at now. If
// not, wake is when to ask again; a zero wake means wait for an event
// instead (an attempt finishing, a resume).
func (h *Host) Acquire(now time.Time) (ok bool, wake time.Time) {
	if ok, wake := h.gate(now); !ok {
		return false, wake
	}
	if h.inFlight >= h.lim.Concurrency || h.auto != nil && h.inFlight >= h.auto.slots() {
		return false, time.Time{}
	}
	h.refill(now)
	if h.tokens < 1-1e-9 { // float rounding at the computed wake time
		// Rounded up, so that the bucket is full enough at the wake time.
		wait := time.Duration(math.Ceil((1 - h.tokens) / (h.rate * headroom) * float64(time.Second)))
		return false, now.Add(max(wait, time.Microsecond))
	}
	h.tokens = max(h.tokens-1, 0)
	h.inFlight++
	if h.auto != nil {
		h.auto.sent(now, h.inFlight)
	}
	if h.breaker == BreakerHalfOpen {
		h.probing = true
	}
	if h.ep != nil && !h.ep.quotaUntil.IsZero() {
		h.spend(now)
	}
	return true, time.Time{}
}

// Take takes a send slot that a fleet of replicas granted (its token and
// its concurrency counted fleet-wide): only pause, hold, breaker and the
// adaptive concurrency (this replica's attempts in flight against its own
// limit; an attempt's end then pumps the host) are checked here.
func (h *Host) Take(now time.Time) (ok bool, wake time.Time) {
	if ok, wake := h.gate(now); !ok {
		return false, wake
	}
	if h.auto != nil && h.inFlight >= h.auto.slots() {
		return false, time.Time{}
	}
	if h.breaker == BreakerHalfOpen {
		h.probing = true
	}
	h.inFlight++
	if h.auto != nil {
		h.auto.sent(now, h.inFlight)
	}
	if h.ep != nil && !h.ep.quotaUntil.IsZero() {
		h.spend(now)
	}
	return true, time.Time{}
}

// gate checks what stops any send at now, for Acquire and Take: a pause,
// a hold, an open breaker (which turns half-open once its time is up), a
// half-open breaker's probe. ok false with a zero wake means wait for an
// event.
func (h *Host) gate(now time.Time) (ok bool, wake time.Time) {
	if h.paused {
		return false, time.Time{}
	}
	e := h.r()
	if now.Before(e.heldUntil) {
		return false, e.heldUntil
	}
	switch h.breaker {
	case BreakerOpen:
		if now.Before(e.openUntil) {
			return false, e.openUntil
		}
		h.breaker = BreakerHalfOpen
		fallthrough
	case BreakerHalfOpen:
		if h.probing || h.inFlight > 0 {
			return false, time.Time{}
		}
	}
	return true, time.Time{}
}

// Drain empties the bucket: a replica that starts pacing alone cannot know
// how much of the burst the fleet has just used, so it starts at the rate.
func (h *Host) Drain(now time.Time) {
	h.refill(now)
	h.tokens = 0
}

func (h *Host) refill(now time.Time) {
	if now.After(h.last) {
		h.tokens = math.Min(Capacity(h.lim), h.tokens+now.Sub(h.last).Seconds()*h.rate*headroom)
		h.last = now
	}
}

// InFlight is the number of attempts holding a slot.
func (h *Host) InFlight() int { return h.inFlight }

// Pause stops new sends until Resume; attempts in flight finish.
func (h *Host) Pause() { h.paused = true }

// Resume undoes Pause.
func (h *Host) Resume() { h.paused = false }

// Paused reports whether the host is paused.
func (h *Host) Paused() bool { return h.paused }

// Idle reports whether the host may be forgotten now and started afresh
// with New later: nothing in flight, not paused or held, the breaker not
// holding sends back, the rate back at its configured value and the bucket
// full, so a new host lets no more through than this one would. What a
// fresh host does not remember is the count of past 429 episodes (the next
// hold starts the schedule over) and the last error shown to operators.
func (h *Host) Idle(now time.Time) bool {
	h.refill(now)
	e := h.r()
	tripped := h.breaker != BreakerClosed && (h.probing || now.Before(e.openUntil))
	return h.inFlight == 0 && !h.paused && !now.Before(e.heldUntil) && !tripped &&
		h.rate >= h.lim.Rate && h.tokens >= Capacity(h.lim)
}

package pacer

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// cleanMax caps Host.clean (it only needs to reach streakLen).
const cleanMax = 1 << 30

// streakLen is how many successes raise the adaptive rate by one step,
// and how clean a streak must be for a 429 after it to count as
// scattered.
func (h *Host) streakLen() int { return max(minStreak, h.lim.Burst) }

// cutRate is the multiplicative half of AIMD, for a 429 episode at now.
// An episode after a clean streak (streakLen successes or more since the
// previous one) is scattered: its hold slows the host, and the rate is
// kept. Episodes closer together halve it. Before, every episode halved
// it, and a partner answering one request in 25 with a 429 took a host
// from 10/s to 1.62/s in five of them, since one step back up (+5%)
// takes a streak of 20: the rate found was thrown away for a rare 429,
// which the hold answers already.
func (h *Host) cutRate(now time.Time) {
	clean := h.clean
	h.clean = 0
	if !h.lim.Adaptive || clean >= h.streakLen() {
		return
	}
	h.refill(now)
	from := h.rate
	h.rate = math.Max(h.rate*decreaseFactor, h.lim.MinRate)
	if h.rate < from {
		h.w().cut = Cut{Cause: "429s", At: now, From: from, To: h.rate}
	}
}

// Limit is the bound on attempts in flight now: the adaptive limit, or
// the configured concurrency.
func (h *Host) Limit() int {
	if h.auto != nil {
		return min(h.auto.slots(), h.lim.Concurrency)
	}
	return h.lim.Concurrency
}

// failureCause names what a failed attempt's status says, for a cut.
func failureCause(status int) string {
	if status == 0 {
		return "errors"
	}
	return strconv.Itoa(status) + "s"
}

// State is a snapshot for operators.
type State struct {
	Rate           float64   `json:"rate"`
	ConfiguredRate float64   `json:"configured_rate"`
	InFlight       int       `json:"in_flight"`
	Paused         bool      `json:"paused"`
	HeldUntil      time.Time `json:"held_until,omitzero"`
	HoldReason     string    `json:"hold_reason,omitempty"`
	Consecutive429 int       `json:"consecutive_429"`
	Breaker        string    `json:"breaker"`
	// Concurrency is the bound on attempts in flight now: the adaptive
	// limit (ConcurrencyAuto) or the configured cap. ConcurrencyWhy and
	// RateWhy explain the adaptive limit and a rate cut (explain.go).
	Concurrency     int    `json:"concurrency_limit"`
	ConcurrencyAuto bool   `json:"concurrency_auto,omitempty"`
	ConcurrencyWhy  string `json:"concurrency_why,omitempty"`
	RateWhy         string `json:"rate_why,omitempty"`
}

// State reports the host's pacing state at now.
func (h *Host) State(now time.Time) State {
	s := State{
		Rate:           h.rate,
		ConfiguredRate: h.lim.Rate,
		InFlight:       h.inFlight,
		Paused:         h.paused,
		Consecutive429: h.r().c429,
		Breaker:        h.breaker,
	}
	h.explain(now, &s)
	e := h.r()
	if h.breaker == BreakerOpen && !now.Before(e.openUntil) {
		s.Breaker = BreakerHalfOpen
	}
	if now.Before(e.heldUntil) {
		s.HeldUntil, s.HoldReason = e.heldUntil, e.holdReason
	}
	if h.paused {
		s.HoldReason = "paused"
	}
	return s
}

// explain fills in s what the adaptive limits are and why.
func (h *Host) explain(now time.Time, s *State) {
	s.Concurrency = h.Limit()
	if h.auto != nil {
		s.ConcurrencyAuto = true
		s.ConcurrencyWhy = h.auto.why(now)
	}
	if c := h.r().cut; h.lim.Adaptive && h.rate < h.lim.Rate && !c.At.IsZero() {
		step := h.lim.Rate * increaseShare
		left := int(math.Ceil((h.lim.Rate-h.rate)/step-1e-9))*h.streakLen() - h.streak
		s.RateWhy = fmt.Sprintf("cut by %s %s from %s to %s; +%s per %d successes: back to %s after %d more",
			c.Cause, ago(now, c.At), perSecond(c.From), perSecond(c.To), perSecond(step), h.streakLen(),
			perSecond(h.lim.Rate), max(left, 1))
	}
}

// why is the adaptive limit in words: "auto 5 (min RTT 21 ms, now 24 ms;
// cut by 503s 2 min ago from 10, grows back while the RTT stays under
// 23 ms)".
func (g *gradient) why(now time.Time) string {
	var s string
	switch {
	case g.phase == phaseProbe && g.minRTT == 0:
		s = "measuring min RTT"
	case g.phase == phaseProbe:
		s = fmt.Sprintf("re-measuring min RTT (was %s) at half the limit, back to %d after", ms(g.minRTT), max(int(g.saved), 1))
	case g.phase == phaseSlowStart:
		s = fmt.Sprintf("slow start: min RTT %s, now %s", ms(g.minRTT), ms(g.lastRTT))
	default:
		s = fmt.Sprintf("min RTT %s, now %s", ms(g.minRTT), ms(g.lastRTT))
	}
	if g.slots() >= g.ceiling {
		s += "; at max_concurrency"
	}
	if c := g.cut; !c.At.IsZero() && g.limit < c.From {
		s += fmt.Sprintf("; cut by %s %s from %d, grows back while the RTT stays under %s",
			c.Cause, ago(now, c.At), int(c.From), ms(g.target()))
	}
	return fmt.Sprintf("auto %d (%s)", g.slots(), s)
}

// ms is a round trip in milliseconds: "21 ms", "0.4 ms".
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	if v < 10 {
		return strconv.FormatFloat(v, 'f', 1, 64) + " ms"
	}
	return strconv.FormatFloat(math.Round(v), 'f', 0, 64) + " ms"
}

// ago is how long before now t was: "just now", "40 s ago", "2 min ago".
func ago(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%d s ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d/time.Minute))
	default:
		return fmt.Sprintf("%d h ago", int(d/time.Hour))
	}
}

func perSecond(r float64) string { return strconv.FormatFloat(r, 'g', 3, 64) + "/s" }

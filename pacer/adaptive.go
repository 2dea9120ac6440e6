package pacer

import (
	"math"
	"slices"
	"time"
)

// Adaptive concurrency (Limits.AutoConcurrency): the host finds how many
// attempts the partner takes at once from the round-trip times it
// measures (Release's now less the Result's SentAt) and from its errors,
// below Limits.Concurrency (max_concurrency) and never under 1.
//
// The controller is a gradient controller after Envoy's adaptive
// concurrency filter (itself after Netflix concurrency-limits'
// GradientLimit): a long-term minimum RTT, measured at a low pinned
// concurrency and re-measured every autoProbeEvery so that it follows a
// partner that really got slower, against the median RTT of each window
// of samples:
//
//	gradient = clamp(minRTT·(1+autoTolerance) / sampleRTT, 0.5, 2)
//	limit    = limit·gradient + headroom(limit)
//
// Against a partner with W workers and a queue, RTT grows as L/W·minRTT
// once L > W, so limit·gradient is about W·(1+tolerance): the update
// lands near the knee plus a small headroom, whatever the limit was. Not
// Vegas: it moves by ±1 per window against thresholds of log10(limit)
// queued requests, which lets 2-4 requests queue at small limits (a
// 4-worker partner whose service time grows with its queue loses a third
// of its throughput at that), and it needs a precise minimum RTT, where a
// loaded host's scheduling noise makes single samples unreliable. Not
// Gradient2's long-term average instead of a minimum: the average drifts
// up with a partner kept loaded, and the limit with it. Envoy's headroom
// of √limit and tolerance of 25% are too loose for small limits for the
// same reason, so headroom is √limit/4 (at least autoMinHeadroom) and the
// tolerance 10%.
//
// Errors (5xx, timeouts, connection errors) cut the limit by
// autoErrorCut at once, not at a window's end: once per episode, as 429s
// are counted (attempts sent before the last cut are stragglers of it).
// At a limit of 1 the RTT is the partner's unloaded RTT (no request of
// ours waits behind another), so after autoOneWindows windows there it
// becomes the minimum, without waiting for the next probe.
// A new host, or one idle for autoIdle, measures its minimum at
// autoStart slots and then doubles its limit each window while the RTT
// stays within the tolerance (slow start), the way Cloud Tasks ramps up
// a new queue. 429s are left to the hold and the AIMD rate.
const (
	autoStart        = 2
	autoTolerance    = 0.10
	autoMinHeadroom  = 0.5
	autoMinGradient  = 0.5
	autoMaxGradient  = 2.0
	autoErrorCut     = 0.5
	autoWindow       = 100 * time.Millisecond // a window lasts at least this long
	autoWindowRTTs   = 2                      // ... and this many min RTTs
	autoSamples      = 8                      // ... and this many samples sent within it (at least the limit)
	autoProbeSamples = 10                     // samples that measure the min RTT
	autoProbeEvery   = time.Minute
	autoIdle         = time.Minute
	autoOneWindows   = 5  // windows at a limit of 1 that re-measure the min RTT
	autoRing         = 32 // newest samples kept for a window's median
)

type autoPhase uint8

const (
	phaseProbe     autoPhase = iota // measuring the min RTT at a pinned low limit
	phaseSlowStart                  // doubling while the RTT stays flat
	phaseSteady                     // the gradient
)

// Cut is the last automatic cut of a limit: what caused it, when, and
// the limit before and after.
type Cut struct {
	Cause string    `json:"cause"`
	At    time.Time `json:"at"`
	From  float64   `json:"from"`
	To    float64   `json:"to"`
}

// gradient is a host's adaptive concurrency state.
type gradient struct {
	limit   float64 // the bound; slots is its floor, within [1, ceiling]
	ceiling int     // Limits.Concurrency
	phase   autoPhase
	saved   float64 // the limit a re-probe pinned down, restored after it

	minRTT  time.Duration // zero until first measured
	minAt   time.Time     // when the last probe measured it
	lastRTT time.Duration // the last window's median

	winStart time.Time
	n        int // samples in the window
	ring     [autoRing]time.Duration
	peak     int       // most attempts in flight during the window
	active   time.Time // the last sample or send

	cut   Cut       // the last cut, by errors or latency
	errAt time.Time // the last cut by errors: attempts sent before are its stragglers
	atOne int       // windows in a row at a limit of 1
}

func newGradient(ceiling int, now time.Time) *gradient {
	g := &gradient{ceiling: ceiling, active: now}
	g.restart(now)
	return g
}

// restart begins afresh: a probe at autoStart slots, then slow start.
func (g *gradient) restart(now time.Time) {
	g.phase, g.saved = phaseProbe, 0
	g.limit = float64(min(autoStart, g.ceiling))
	g.open(now)
}

// slots is the whole number of attempts the limit allows.
func (g *gradient) slots() int { return max(int(g.limit), 1) }

// open starts a new window of samples.
func (g *gradient) open(now time.Time) {
	g.winStart, g.n, g.peak = now, 0, 0
}

func (g *gradient) setCeiling(c int) {
	g.ceiling = c
	g.limit = math.Min(g.limit, float64(c))
	g.saved = math.Min(g.saved, float64(c))
}

// sent notes an attempt starting with inFlight attempts in flight.
func (g *gradient) sent(now time.Time, inFlight int) {
	if inFlight == 1 && now.Sub(g.active) >= autoIdle {
		g.restart(now)
	}
	g.active = now
	g.peak = max(g.peak, inFlight)
}

// sample takes one attempt's round trip, sent at sentAt and answered at
// now, and ends the window once it is long and full enough.
func (g *gradient) sample(now, sentAt time.Time) {
	g.active = now
	if sentAt.Before(g.winStart) {
		return // sent under an older limit
	}
	g.ring[g.n%autoRing] = now.Sub(sentAt)
	g.n++
	// A window waits for a whole round of the limit: its first answers
	// are the ones that did not queue, and alone they would look flat.
	need := max(autoSamples, g.slots())
	if g.phase == phaseProbe {
		need = autoProbeSamples
	}
	if g.n < need || now.Sub(g.winStart) < max(autoWindow, autoWindowRTTs*g.minRTT) {
		return
	}
	low, rtt := g.quantiles()
	g.lastRTT = rtt
	switch g.phase {
	case phaseProbe:
		g.minRTT, g.minAt = low, now
		if g.saved > 0 {
			g.limit, g.phase = g.saved, phaseSteady
		} else {
			g.limit, g.phase = math.Min(2*g.limit, float64(g.ceiling)), phaseSlowStart
		}
	case phaseSlowStart:
		g.minRTT = min(g.minRTT, low)
		if rtt > g.target() {
			g.phase = phaseSteady
			g.update(rtt)
		} else if g.busy() {
			g.limit = math.Min(2*g.limit, float64(g.ceiling))
		}
	case phaseSteady:
		g.minRTT = min(g.minRTT, low)
		if g.slots() == 1 && g.peak <= 1 {
			g.atOne++
		} else {
			g.atOne = 0
		}
		if g.atOne >= autoOneWindows {
			// One at a time queues nothing of ours: this is the
			// partner's unloaded RTT now (it got slower). Not after one
			// window: replicas that share the partner each come down to
			// 1 for a moment and would take each other's load for it.
			g.minRTT, g.minAt, g.atOne = low, now, 0
		}
		g.update(rtt)
		if now.Sub(g.minAt) >= autoProbeEvery {
			// Re-measure the minimum at half the limit, so that it
			// follows a partner that got slower for good.
			g.saved, g.phase = g.limit, phaseProbe
			g.limit = math.Max(1, math.Floor(g.limit/2))
		}
	}
	g.open(now)
}

// target is the RTT still counted as flat.
func (g *gradient) target() time.Duration {
	return time.Duration(float64(g.minRTT) * (1 + autoTolerance))
}

// busy reports whether the window used at least half the limit: a host
// whose rate (or backlog) keeps it below that learns nothing about more.
func (g *gradient) busy() bool { return 2*g.peak >= g.slots() }

// update applies the gradient of the window's median rtt.
func (g *gradient) update(rtt time.Duration) {
	grad := math.Min(math.Max(float64(g.target())/float64(max(rtt, 1)), autoMinGradient), autoMaxGradient)
	if grad >= 1 && !g.busy() {
		return
	}
	head := math.Max(autoMinHeadroom, math.Sqrt(g.limit)/4)
	next := math.Min(math.Max(g.limit*grad+head, 1), float64(g.ceiling))
	if grad < 1 {
		// Latency says down: never up. A cut worth telling (not one
		// of the gradient's small steps) is shown to operators.
		next = math.Min(next, g.limit)
		if next <= 0.75*g.limit {
			g.cut = Cut{Cause: "latency", At: g.winStart, From: g.limit, To: next}
		}
	}
	g.limit = next
}

// quantiles are the window's 10th percentile, which measures the
// minimum (noise only ever adds latency, and among replicas that share
// a partner it is the requests that found a worker free), and its
// median, which the gradient compares with it.
func (g *gradient) quantiles() (low, median time.Duration) {
	k := min(g.n, autoRing)
	s := make([]time.Duration, k)
	copy(s, g.ring[:k])
	slices.Sort(s)
	return s[k/10], s[k/2]
}

// failed cuts the limit for an error of an attempt sent at sentAt, once
// per episode: attempts sent before the last cut are its stragglers.
func (g *gradient) failed(now, sentAt time.Time, cause string) {
	g.active = now
	if sentAt.Before(g.errAt) {
		return
	}
	g.errAt = now
	from := g.limit
	if g.phase == phaseProbe && g.saved > 0 {
		from = g.saved
		g.saved = math.Max(1, g.saved*autoErrorCut)
	} else {
		g.limit = math.Max(1, g.limit*autoErrorCut)
		if g.phase == phaseSlowStart {
			g.phase = phaseSteady
		}
	}
	g.cut = Cut{Cause: cause, At: now, From: from, To: math.Max(1, from*autoErrorCut)}
	g.open(now)
}

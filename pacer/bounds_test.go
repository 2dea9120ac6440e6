package pacer

import (
	"math"
	"testing"
	"time"
)

// At the largest rate and burst config accepts, the bucket keeps B + R·W in
// every window and delivers the rate.
func TestAtRateMax(t *testing.T) {
	const burst = 1000
	h := New(Limits{Rate: RateMax, Burst: burst, Concurrency: 1 << 30}, t0)
	dur := 300 * time.Millisecond
	sends := drive(h, t0, dur)
	for _, w := range []time.Duration{time.Microsecond, time.Millisecond, 100 * time.Millisecond} {
		limit := float64(burst) + RateMax*w.Seconds()
		if got := maxInWindow(sends, w); float64(got) > limit {
			t.Errorf("window %v: %d sends, limit B+R·W = %.0f", w, got, limit)
		}
	}
	achieved := float64(len(sends)-burst) / dur.Seconds()
	if achieved < 0.98*RateMax || achieved > 1.01*RateMax {
		t.Errorf("achieved %.0f/s, want %.0f/s within 2%%", achieved, float64(RateMax))
	}

	// The whole of BurstMax leaves at once (less the jitter margin).
	h = New(Limits{Rate: RateMax, Burst: BurstMax, Concurrency: 1 << 30}, t0)
	n := 0
	for ok, _ := h.Acquire(t0); ok; ok, _ = h.Acquire(t0) {
		n++
	}
	if want := BurstMax - int(RateMax*jitterMargin.Seconds()); n != want {
		t.Errorf("burst at t0: %d sends, want %d", n, want)
	}
}

// At the smallest rate, the next token is due in ten hours (a finite,
// future wake time), and then it is there.
func TestAtRateMin(t *testing.T) {
	h := New(Limits{Rate: RateMin, Burst: 1, Concurrency: 1}, t0)
	if ok, _ := h.Acquire(t0); !ok {
		t.Fatal("the first send waited")
	}
	h.Release(t0, Result{Outcome: Success, SentAt: t0})
	ok, wake := h.Acquire(t0)
	if ok || wake != t0.Add(tokenWait(RateMin)) {
		t.Fatalf("second send: ok=%v wake %v, want a wait of %v", ok, wake.Sub(t0), tokenWait(RateMin))
	}
	if ok, _ := h.Acquire(wake); !ok {
		t.Fatalf("no token at the wake time %v", wake.Sub(t0))
	}
}

// Limits outside the bounds (a Limits not from config) are clamped, never
// overflow: the host sends at the bound, and a wake time is always in the
// future and finite.
func TestOutOfBoundsLimitsClamp(t *testing.T) {
	for _, l := range []Limits{
		{Rate: 1e308, Burst: math.MaxInt, Concurrency: 1},
		{Rate: math.Inf(1), Burst: 20, Concurrency: 1},
		{Rate: math.NaN(), Burst: 20, Concurrency: 1, MinRate: math.NaN()},
		{Rate: 1e-300, Burst: 1, Concurrency: 1, Adaptive: true, MinRate: 1e-300},
	} {
		h := New(l, t0)
		now := t0
		for i := range 5 {
			ok, wake := h.Acquire(now)
			if ok {
				h.Release(now, Result{Outcome: Throttled, SentAt: now}) // halves an adaptive rate
				h.Release(now, Result{Outcome: Success, SentAt: now})
				continue
			}
			if !wake.After(now) || wake.Sub(now) > 11*time.Hour {
				t.Fatalf("%+v: attempt %d: wake in %v", l, i, wake.Sub(now))
			}
			now = wake
		}
		if r := h.State(now).Rate; !(r >= RateMin && r <= RateMax) {
			t.Errorf("%+v: rate %g outside the bounds", l, r)
		}
	}
}

// A host waiting for a token at a slow rate takes a faster rate at once:
// the new wake time is the new rate's, not the old one's.
func TestSetLimitsWakesWaitingHost(t *testing.T) {
	for _, from := range []float64{RateMin, 1.0 / 3600, 1e308} {
		h := New(Limits{Rate: from, Burst: 1, Concurrency: 100}, t0)
		for ok, _ := h.Acquire(t0); ok; ok, _ = h.Acquire(t0) {
		}
		now := t0.Add(time.Millisecond)
		h.SetLimits(Limits{Rate: 10, Burst: 1, Concurrency: 100}, now)
		ok, wake := h.Acquire(now)
		if !ok && wake.Sub(now) > tokenWait(10) {
			t.Errorf("from %g/s to 10/s: next token in %v, want at most %v", from, wake.Sub(now), tokenWait(10))
		}
	}
}

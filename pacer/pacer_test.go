package pacer

import (
	"fmt"
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// tokenWait is how long one token takes to refill at rate.
func tokenWait(rate float64) time.Duration {
	return time.Duration(math.Ceil(float64(time.Second) / (rate * headroom)))
}

// drive runs a host with an endless backlog and instant deliveries for dur,
// waking exactly when Acquire says to, and returns the send times.
func drive(h *Host, start time.Time, dur time.Duration) []time.Time {
	var sends []time.Time
	now := start
	for now.Before(start.Add(dur)) {
		ok, wake := h.Acquire(now)
		if ok {
			sends = append(sends, now)
			h.Release(now, Result{Outcome: Success, SentAt: now})
			continue
		}
		if wake.IsZero() {
			panic("no wake time with free slots")
		}
		now = wake
	}
	return sends
}

// maxInWindow returns the most sends in any window of length w.
func maxInWindow(sends []time.Time, w time.Duration) int {
	best, j := 0, 0
	for i := range sends {
		for sends[i].Sub(sends[j]) >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

func TestTokenBucketBoundsAndRate(t *testing.T) {
	for _, tc := range []struct {
		rate  float64
		burst int
	}{
		{200, 20}, {1, 1}, {10, 20}, {1000, 1}, {0.5, 3}, {600.0 / 60, 5}, {3333, 100},
	} {
		t.Run(fmt.Sprintf("%g/s_burst%d", tc.rate, tc.burst), func(t *testing.T) {
			h := New(Limits{Rate: tc.rate, Burst: tc.burst, Concurrency: 1 << 20}, t0)
			dur := time.Duration(max(20, 2000/tc.rate) * float64(time.Second))
			sends := drive(h, t0, dur)
			for _, w := range []time.Duration{time.Millisecond, 100 * time.Millisecond, time.Second, 5 * time.Second} {
				limit := float64(tc.burst) + tc.rate*w.Seconds()
				if got := maxInWindow(sends, w); float64(got) > limit {
					t.Errorf("window %v: %d sends, limit B+R·W = %.1f", w, got, limit)
				}
			}
			// A receiver sees the sends each delayed by up to jitterMargin:
			// arrivals in a window W come from sends in a window W + margin.
			// While the whole margin is held back (R·25 ms within half the
			// burst), they too stay within B + R·W.
			if tc.rate*jitterMargin.Seconds() <= float64(tc.burst/2) {
				for _, w := range []time.Duration{time.Millisecond, 100 * time.Millisecond, time.Second, 5 * time.Second} {
					limit := float64(tc.burst) + tc.rate*w.Seconds()
					if got := maxInWindow(sends, w+jitterMargin); float64(got) > limit {
						t.Errorf("window %v, arrivals jittered by up to %v: %d, limit B+R·W = %.1f", w, jitterMargin, got, limit)
					}
				}
			}
			// Under a backlog the long-run rate is the configured one.
			achieved := float64(len(sends)-tc.burst) / dur.Seconds()
			if achieved < 0.98*tc.rate || achieved > 1.01*tc.rate {
				t.Errorf("achieved %.3f/s, want %.3f/s within 2%%", achieved, tc.rate)
			}
		})
	}
}

func TestConcurrencyCap(t *testing.T) {
	h := New(Limits{Rate: 1000, Burst: 100, Concurrency: 3}, t0)
	for i := range 3 {
		if ok, _ := h.Acquire(t0); !ok {
			t.Fatalf("acquire %d refused", i)
		}
	}
	if ok, wake := h.Acquire(t0); ok || !wake.IsZero() {
		t.Fatalf("fourth acquire: ok=%v wake=%v, want refused with no wake (wait for a release)", ok, wake)
	}
	h.Release(t0, Result{Outcome: Success, SentAt: t0})
	if ok, _ := h.Acquire(t0); !ok {
		t.Fatal("acquire after release refused")
	}
}

func TestHoldOn429(t *testing.T) {
	lim := Limits{Rate: 100, Burst: 10, Concurrency: 4, HoldSchedule: []time.Duration{2 * time.Second, 5 * time.Second, 15 * time.Second}, MaxRetryAfter: time.Minute}
	tests := []struct {
		name      string
		results   []Result // applied one after another, each sent just before
		wantUntil time.Duration
		capped    bool
	}{
		{"retry-after seconds", []Result{{Outcome: Throttled, RetryAfter: 7 * time.Second, HasRetry: true}}, 7 * time.Second, false},
		{"no header uses schedule", []Result{{Outcome: Throttled}}, 2 * time.Second, false},
		{"escalates", []Result{{Outcome: Throttled}, {Outcome: Throttled}}, 2*time.Second + 5*time.Second, false},
		{"escalation stops at the last step", []Result{{Outcome: Throttled}, {Outcome: Throttled}, {Outcome: Throttled}, {Outcome: Throttled}}, 2*time.Second + 5*time.Second + 15*time.Second + 15*time.Second, false},
		// The success takes the hold's one token; the next send waits 1/(rate·headroom).
		{"success resets", []Result{{Outcome: Throttled}, {Outcome: Success}, {Outcome: Throttled}}, 2*time.Second + tokenWait(100) + 2*time.Second, false},
		{"capped", []Result{{Outcome: Throttled, RetryAfter: time.Hour, HasRetry: true}}, time.Minute, true},
		{"5xx never extends a hold", []Result{{Outcome: Throttled}, {Outcome: Failure}}, 2 * time.Second, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := New(lim, t0)
			now := t0
			var hold Hold
			for _, r := range tc.results {
				ok, wake := h.Acquire(now)
				if !ok {
					now = wake
					if ok, _ = h.Acquire(now); !ok {
						t.Fatalf("no slot at %v", now)
					}
				}
				r.SentAt = now
				hold = h.Release(now, r)
			}
			want := t0.Add(tc.wantUntil)
			if r := tc.results[len(tc.results)-1]; r.Outcome == Failure {
				// The failure was sent at the end of the hold; the hold stays where it was.
				if !h.r().heldUntil.Equal(want) {
					t.Fatalf("5xx moved the hold to +%v, want +%v", h.r().heldUntil.Sub(t0), tc.wantUntil)
				}
				return
			}
			if !hold.Until.Equal(want) || hold.Capped != tc.capped {
				t.Fatalf("held until +%v (capped %v), want +%v (capped %v)", hold.Until.Sub(t0), hold.Capped, tc.wantUntil, tc.capped)
			}
			if ok, wake := h.Acquire(want.Add(-time.Millisecond)); ok || !wake.Equal(want) {
				t.Fatalf("during hold: ok=%v wake=%v", ok, wake)
			}
			if ok, _ := h.Acquire(want); !ok {
				t.Fatal("no send at the end of the hold")
			}
		})
	}
}

func TestGentleResumeAndStragglers(t *testing.T) {
	h := New(Limits{Rate: 10, Burst: 10, Concurrency: 4, Adaptive: true, MinRate: 1}, t0)
	var sent []time.Time
	for range 4 {
		ok, _ := h.Acquire(t0)
		if !ok {
			t.Fatal("burst refused")
		}
		sent = append(sent, t0)
	}
	now := t0.Add(10 * time.Millisecond)
	h.Release(now, Result{Outcome: Throttled, RetryAfter: time.Second, HasRetry: true, SentAt: sent[0]})
	// Three stragglers sent before the hold: one episode, one decrease.
	for _, s := range sent[1:] {
		h.Release(now.Add(time.Millisecond), Result{Outcome: Throttled, SentAt: s})
	}
	st := h.State(now)
	if st.Rate != 5 || st.Consecutive429 != 1 {
		t.Fatalf("after one episode of 4 429s: rate %v c429 %d, want 5 and 1", st.Rate, st.Consecutive429)
	}
	if !st.HeldUntil.Equal(now.Add(time.Second)) {
		t.Fatalf("stragglers changed the hold: %v", st.HeldUntil.Sub(now))
	}
	// At the end of the hold one send goes at once, the rest at the lowered rate.
	sends := drive(h, st.HeldUntil, 2*time.Second)
	if got := maxInWindow(sends, time.Second); got > 6 {
		t.Fatalf("%d sends in the first second after the hold, want at most 1 + 5", got)
	}
}

func TestAIMD(t *testing.T) {
	lim := Limits{Rate: 50, Burst: 10, Concurrency: 4, Adaptive: true, MinRate: 5}
	h := New(lim, t0)
	now := t0
	for i, want := range []float64{25, 12.5, 6.25, 5, 5} {
		ok, wake := h.Acquire(now)
		for !ok {
			now = wake
			ok, wake = h.Acquire(now)
		}
		h.Release(now, Result{Outcome: Throttled, RetryAfter: time.Second, HasRetry: true, SentAt: now})
		if got := h.State(now).Rate; got != want {
			t.Fatalf("after 429 #%d rate %v, want %v", i+1, got, want)
		}
	}
	// Clean streaks of max(10, burst) successes add 5% of 50 = 2.5/s each.
	sends := drive(h, h.r().heldUntil, 30*time.Second)
	if len(sends) == 0 || h.State(now).Rate != 50 {
		t.Fatalf("rate after a clean run: %v, want back at 50", h.State(now).Rate)
	}

	off := New(Limits{Rate: 50, Burst: 10, Concurrency: 4, Adaptive: false}, t0)
	off.Acquire(t0)
	off.Release(t0, Result{Outcome: Throttled, SentAt: t0})
	if got := off.State(t0).Rate; got != 50 {
		t.Fatalf("adaptive off: rate %v after 429, want 50", got)
	}
}

func TestBreaker(t *testing.T) {
	h := New(Limits{Rate: 1000, Burst: 100, Concurrency: 10, BreakerFailures: 3, BreakerCooldown: 30 * time.Second}, t0)
	fail := func(now time.Time) {
		t.Helper()
		if ok, _ := h.Acquire(now); !ok {
			t.Fatalf("acquire refused at +%v (breaker %s)", now.Sub(t0), h.State(now).Breaker)
		}
		h.Release(now, Result{Outcome: Failure, SentAt: now})
	}
	fail(t0)
	fail(t0)
	h.Acquire(t0) // one in flight when the breaker opens
	fail(t0)
	if st := h.State(t0); st.Breaker != BreakerOpen {
		t.Fatalf("after 3 failures breaker %s, want open", st.Breaker)
	}
	if ok, wake := h.Acquire(t0.Add(time.Second)); ok || !wake.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("open breaker: ok=%v wake=%v", ok, wake)
	}
	h.Release(t0.Add(time.Second), Result{Outcome: Failure, SentAt: t0}) // straggler
	half := t0.Add(30 * time.Second)
	if ok, _ := h.Acquire(half); !ok {
		t.Fatal("half-open: probe refused")
	}
	if ok, wake := h.Acquire(half); ok || !wake.IsZero() {
		t.Fatal("half-open: a second send went while the probe is in flight")
	}
	h.Release(half, Result{Outcome: Failure, SentAt: half})
	if st := h.State(half); st.Breaker != BreakerOpen {
		t.Fatalf("failed probe: breaker %s, want open again", st.Breaker)
	}
	later := half.Add(30 * time.Second)
	if ok, _ := h.Acquire(later); !ok {
		t.Fatal("second probe refused")
	}
	h.Release(later, Result{Outcome: Success, SentAt: later})
	if st := h.State(later); st.Breaker != BreakerClosed {
		t.Fatalf("successful probe: breaker %s, want closed", st.Breaker)
	}
	// 429s never trip it.
	for range 10 {
		now := h.r().heldUntil
		if ok, _ := h.Acquire(now); !ok {
			t.Fatal("acquire refused after hold")
		}
		h.Release(now, Result{Outcome: Throttled, SentAt: now})
	}
	if st := h.State(h.r().heldUntil); st.Breaker != BreakerClosed {
		t.Fatalf("429s tripped the breaker: %s", st.Breaker)
	}
}

func TestPauseAndReload(t *testing.T) {
	h := New(Limits{Rate: 5, Burst: 1, Concurrency: 2, Adaptive: true}, t0)
	h.Pause()
	if ok, wake := h.Acquire(t0); ok || !wake.IsZero() {
		t.Fatal("paused host sent")
	}
	h.Resume()
	if ok, _ := h.Acquire(t0); !ok {
		t.Fatal("resumed host refused")
	}
	h.Release(t0, Result{Outcome: Success, SentAt: t0})
	h.SetLimits(Limits{Rate: 100, Burst: 1, Concurrency: 2, Adaptive: true}, t0)
	sends := drive(h, t0, 10*time.Second)
	if got := float64(len(sends)) / 10; got < 98 {
		t.Fatalf("after reload to 100/s: %.1f/s", got)
	}
}

func TestTakeChecksHoldPauseBreaker(t *testing.T) {
	now := time.Unix(0, 0)
	h := New(Limits{Rate: 1, Burst: 1, Concurrency: 1, BreakerFailures: 1, BreakerCooldown: time.Second}, now)
	for i := range 3 { // tokens and concurrency are the fleet's business
		if ok, _ := h.Take(now); !ok {
			t.Fatalf("take %d refused", i)
		}
	}
	if h.InFlight() != 3 {
		t.Fatalf("in flight %d", h.InFlight())
	}
	h.Release(now, Result{Outcome: Throttled, HasRetry: true, RetryAfter: time.Second, SentAt: now})
	if ok, wake := h.Take(now); ok || !wake.Equal(now.Add(time.Second)) {
		t.Fatalf("held: ok %v wake %v", ok, wake)
	}
	now = now.Add(time.Second)
	h.Pause()
	if ok, _ := h.Take(now); ok {
		t.Fatal("paused: granted")
	}
	h.Resume()
	h.Release(now, Result{Outcome: Failure, SentAt: now})
	if ok, _ := h.Take(now); ok {
		t.Fatal("breaker open: granted")
	}
	h.Release(now, Result{Outcome: NoSend, SentAt: now}) // the last one in flight
	now = now.Add(time.Second)
	if ok, _ := h.Take(now); !ok {
		t.Fatal("half-open probe refused")
	}
	if ok, _ := h.Take(now); ok {
		t.Fatal("second probe granted")
	}
}

func TestDrain(t *testing.T) {
	now := time.Unix(0, 0)
	h := New(Limits{Rate: 10, Burst: 10, Concurrency: 10}, now)
	h.Drain(now)
	if ok, wake := h.Acquire(now); ok || wake.IsZero() {
		t.Fatalf("drained bucket granted (ok %v wake %v)", ok, wake)
	}
}

package pacer

import (
	"testing"
	"time"
)

// A partner's quota: the budget left beyond the attempts in flight is
// spent one per send; used up, the host is held until the reset as
// "quota", without a 429's rate cut or escalation.
func TestQuota(t *testing.T) {
	t0 := time.Unix(1000, 0)
	h := New(Limits{Rate: 100, Burst: 10, Concurrency: 10, Adaptive: true}, t0)
	for range 3 {
		if ok, _ := h.Acquire(t0); !ok {
			t.Fatal("no slot")
		}
	}
	h.Release(t0, Result{Outcome: Success, SentAt: t0})
	// 4 left at the partner, 2 in flight: 2 more may go before the reset.
	reset := t0.Add(time.Second)
	if h.Quota(t0, 4, reset) {
		t.Fatal("held with 2 left")
	}
	for i := range 2 {
		if ok, _ := h.Acquire(t0); !ok {
			t.Fatalf("send %d of the budget refused", i+1)
		}
	}
	ok, wake := h.Acquire(t0)
	st := h.State(t0)
	if ok || !wake.Equal(reset) || st.HoldReason != HoldQuota || !st.HeldUntil.Equal(reset) || st.Rate != 100 || st.Consecutive429 != 0 {
		t.Fatalf("budget spent: ok %v wake %v state %+v", ok, wake, st)
	}
	if ok, _ := h.Acquire(reset); !ok {
		t.Fatal("no send after the reset")
	}
	// After the reset the budget is unknown: the bucket alone paces.
	if ok, _ := h.Acquire(reset); !ok {
		t.Fatal("held after the reset without a new quota")
	}

	// Remaining below the attempts in flight holds at once; a reset in the
	// past holds nothing.
	at := reset.Add(time.Second)
	if h.Quota(at, 0, at) || h.Quota(at, 0, at.Add(-time.Second)) {
		t.Fatal("held with a reset not in the future")
	}
	if !h.Quota(at, 3, at.Add(2*time.Second)) { // 5 in flight
		t.Fatal("not held with 3 left and 5 in flight")
	}
	// A quota hold never shortens a longer 429 hold.
	h.Release(at, Result{Outcome: Throttled, RetryAfter: 10 * time.Second, HasRetry: true, SentAt: at})
	h.Quota(at, 0, at.Add(time.Second))
	if st := h.State(at); !st.HeldUntil.Equal(at.Add(10*time.Second)) || st.HoldReason != "429 Retry-After" {
		t.Fatalf("quota after a 429: %+v", st)
	}
}

// Answers from one window keep the earliest reset they state: with resets
// rounded up to whole seconds, that is the tightest bound. A remaining
// count that goes up is a new window, whose reset is taken as said.
func TestQuotaKeepsTheTightestReset(t *testing.T) {
	t0 := time.Unix(1000, 0)
	h := New(Limits{Rate: 10, Burst: 10, Concurrency: 1}, t0)
	// The window resets at t0+1s; answers at +50 ms and +950 ms both say 1 s.
	h.Quota(t0.Add(50*time.Millisecond), 9, t0.Add(1050*time.Millisecond))
	at := t0.Add(950 * time.Millisecond)
	if !h.Quota(at, 0, at.Add(time.Second)) {
		t.Fatal("not held with 0 left")
	}
	if st := h.State(at); !st.HeldUntil.Equal(t0.Add(1050 * time.Millisecond)) {
		t.Fatalf("held until %v, want the earlier bound %v", st.HeldUntil, t0.Add(1050*time.Millisecond))
	}
	// The next window: the count goes up, its reset is taken as said.
	at = t0.Add(1100 * time.Millisecond)
	h.Quota(at, 9, at.Add(time.Second))
	at = t0.Add(1200 * time.Millisecond)
	if !h.Quota(at, 0, at.Add(time.Second)) {
		t.Fatal("not held")
	}
	if st := h.State(at); !st.HeldUntil.Equal(t0.Add(2100 * time.Millisecond)) {
		t.Fatalf("held until %v, want %v", st.HeldUntil, t0.Add(2100*time.Millisecond))
	}
}

package pacer

import (
	"testing"
	"time"
)

// TestHoldOnUnresolved: a name that does not resolve holds the host by
// hold_schedule, escalating per episode, with reason dns; it neither lowers
// the rate nor counts towards the breaker; stragglers of an episode do not
// escalate it; an answer from the host ends the escalation.
func TestHoldOnUnresolved(t *testing.T) {
	lim := Limits{Rate: 100, Burst: 10, Concurrency: 4, Adaptive: true, BreakerFailures: 1, BreakerCooldown: time.Minute,
		HoldSchedule: []time.Duration{2 * time.Second, 5 * time.Second, 15 * time.Second}}
	h := New(lim, t0)
	now := t0
	send := func() time.Time {
		t.Helper()
		ok, wake := h.Acquire(now)
		if !ok {
			now = wake
			if ok, _ = h.Acquire(now); !ok {
				t.Fatalf("no slot at +%v", now.Sub(t0))
			}
		}
		return now
	}
	// Two attempts in flight; both find no such host.
	a, b := send(), send()
	now = now.Add(5 * time.Millisecond)
	if hold := h.Release(now, Result{Outcome: Unresolved, SentAt: a}); !hold.Until.Equal(now.Add(2 * time.Second)) {
		t.Fatalf("first NXDOMAIN: held until +%v, want +2.005s", hold.Until.Sub(t0))
	}
	later := now.Add(10 * time.Millisecond)
	if hold := h.Release(later, Result{Outcome: Unresolved, SentAt: b}); !hold.Until.Equal(now.Add(2 * time.Second)) {
		t.Fatalf("straggler escalated the hold to +%v, want +2.005s", hold.Until.Sub(t0))
	}
	st := h.State(later)
	if st.HoldReason != HoldDNS || st.Rate != 100 || st.Breaker != BreakerClosed || st.Consecutive429 != 0 {
		t.Fatalf("state after NXDOMAIN: %+v; want held for dns, rate 100, breaker closed, no 429s", st)
	}
	want := now.Add(2 * time.Second)
	if ok, wake := h.Acquire(later); ok || !wake.Equal(want) {
		t.Fatalf("during the dns hold: ok=%v wake=+%v", ok, wake.Sub(t0))
	}
	// Escalation: 2 s, 5 s, 15 s, 15 s.
	for _, step := range []time.Duration{5 * time.Second, 15 * time.Second, 15 * time.Second} {
		sent := send()
		if !sent.Equal(want) {
			t.Fatalf("sent at +%v, want at the end of the hold, +%v", sent.Sub(t0), want.Sub(t0))
		}
		want = now.Add(step)
		if hold := h.Release(now, Result{Outcome: Unresolved, SentAt: sent}); !hold.Until.Equal(want) {
			t.Fatalf("held until +%v, want +%v", hold.Until.Sub(t0), want.Sub(t0))
		}
	}
	// The name resolves and the host answers: the next NXDOMAIN starts over.
	h.Release(now, Result{Outcome: Answered, SentAt: send()})
	sent := send()
	if hold := h.Release(now, Result{Outcome: Unresolved, SentAt: sent}); !hold.Until.Equal(now.Add(2 * time.Second)) {
		t.Fatalf("after an answer: held until +%v, want 2 s from +%v", hold.Until.Sub(t0), now.Sub(t0))
	}
}

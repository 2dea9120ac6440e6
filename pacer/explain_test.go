package pacer

import (
	"strings"
	"testing"
	"time"
)

// A 429 after a clean streak (scattered) holds the host but keeps its
// rate; 429s within a streak of each other halve it, and the cut says
// what caused it, when, and what brings the rate back. Five 429s at one
// in 25 used to take 10/s down to 1.62/s.
func TestScattered429sKeepTheRate(t *testing.T) {
	lim := Limits{Rate: 10, Burst: 20, Concurrency: 4, Adaptive: true, MinRate: 1}
	h := New(lim, t0)
	now := t0
	send := func(o Outcome) {
		ok, wake := h.Acquire(now)
		for !ok {
			now = wake
			ok, wake = h.Acquire(now)
		}
		h.Release(now, Result{Outcome: o, SentAt: now})
	}
	for i := range 125 {
		o := Success
		if i%25 == 24 {
			o = Throttled
		}
		send(o)
	}
	if st := h.State(now); st.Rate != 10 || st.RateWhy != "" {
		t.Errorf("after five 429s at one in 25: rate %v (%q), want 10", st.Rate, st.RateWhy)
	}
	for range 5 { // one in 5: within a streak
		send(Success)
		send(Success)
		send(Success)
		send(Success)
		send(Throttled)
	}
	st := h.State(now.Add(2 * time.Minute))
	if st.Rate >= 5 {
		t.Errorf("after 429s at one in 5: rate %v, want cut", st.Rate)
	}
	if !strings.HasPrefix(st.RateWhy, "cut by 429s 2 min ago from ") || !strings.Contains(st.RateWhy, "+0.5/s per 20 successes: back to 10/s after") {
		t.Errorf("why = %q", st.RateWhy)
	}
}

func TestWhyWords(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{ms(21400 * time.Microsecond), "21 ms"},
		{ms(400 * time.Microsecond), "0.4 ms"},
		{ago(t0, t0.Add(-300*time.Millisecond)), "just now"},
		{ago(t0, t0.Add(-40*time.Second)), "40 s ago"},
		{ago(t0, t0.Add(-150*time.Second)), "2 min ago"},
		{ago(t0, t0.Add(-3*time.Hour)), "3 h ago"},
		{perSecond(1.625), "1.62/s"},
		{failureCause(503), "503s"},
		{failureCause(0), "errors"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	h := New(Limits{Rate: 1000, Burst: 100, Concurrency: 64, AutoConcurrency: true}, t0)
	if got := h.State(t0).ConcurrencyWhy; got != "auto 2 (measuring min RTT)" {
		t.Errorf("new host: %q", got)
	}
	g := h.auto
	g.limit, g.phase, g.minRTT, g.lastRTT = 5, phaseSteady, 21*time.Millisecond, 24*time.Millisecond
	g.cut = Cut{Cause: "503s", At: t0, From: 10, To: 5}
	if got, want := h.State(t0.Add(2*time.Minute)).ConcurrencyWhy,
		"auto 5 (min RTT 21 ms, now 24 ms; cut by 503s 2 min ago from 10, grows back while the RTT stays under 23 ms)"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

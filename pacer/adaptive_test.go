package pacer

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// An overloadable partner: 4 workers, 20 ms a request plus
// 5 ms for each request still waiting, 503 after 500 ms waiting.
func acceptancePartner() *partner {
	return newPartner(4, 20*time.Millisecond, 5*time.Millisecond, 500*time.Millisecond)
}

// limitsWith is 1000/s with a burst of 100 (a user who guessed high) and
// the given concurrency, adaptive under it when auto.
func limitsWith(concurrency int, auto bool) Limits {
	return Limits{Rate: 1000, Burst: 100, Concurrency: concurrency, AutoConcurrency: auto,
		BreakerFailures: 5, BreakerCooldown: 30 * time.Second}
}

type simRun struct {
	took     time.Duration
	rejected int
	p99      time.Duration
	peak     int
	limits   []int
	why      string
}

func simulate(t *testing.T, l Limits, n int) simRun {
	var out simRun
	synctest.Test(t, func(t *testing.T) {
		p := acceptancePartner()
		r := newReplica(l, p, n)
		out.took, out.limits = run(r)
		out.rejected, out.p99, out.peak, out.why = p.rejected, p.p99(), r.peak, r.why()
	})
	return out
}

// Against the acceptance partner, auto delivers 1,500 webhooks within
// 1.25× the time of the hand-tuned concurrency 4, with at most 2% 503s
// and a p99 service time within 2× the unloaded 20 ms, and settles near
// the knee; concurrency 64 overloads the partner.
func TestAutoConvergesNearTheKnee(t *testing.T) {
	fixed := simulate(t, limitsWith(4, false), 1500)
	auto := simulate(t, limitsWith(64, true), 1500)
	high := simulate(t, limitsWith(64, false), 1500)
	t.Logf("fixed 4: %v, %d 503s, p99 %v", fixed.took, fixed.rejected, fixed.p99)
	t.Logf("auto:    %v, %d 503s, p99 %v, peak %d, limits %v", auto.took, auto.rejected, auto.p99, auto.peak, auto.limits)
	t.Logf("fixed 64: %v, %d 503s, p99 %v", high.took, high.rejected, high.p99)
	if auto.took > fixed.took*5/4 {
		t.Errorf("auto took %v, more than 1.25 × %v (fixed 4)", auto.took, fixed.took)
	}
	if auto.rejected > 30 || auto.p99 > 40*time.Millisecond {
		t.Errorf("auto: %d 503s (want <= 30), p99 service %v (want <= 40ms)", auto.rejected, auto.p99)
	}
	for i, l := range auto.limits[20:] { // after 2 s
		if l < 3 || l > 8 {
			t.Errorf("limit %d at %v, want it near the knee (4)", l, time.Duration(i+20)*100*time.Millisecond)
		}
	}
	if !strings.HasPrefix(auto.why, "auto ") || !strings.Contains(auto.why, "min RTT 22 ms") {
		t.Errorf("why = %q", auto.why)
	}
	if high.rejected < 100 || high.p99 < 100*time.Millisecond {
		t.Errorf("fixed 64 did not overload the partner: %d 503s, p99 %v", high.rejected, high.p99)
	}
}

// Slow start: a new host starts at 2 and doubles while the RTT stays
// flat; it never goes above max_concurrency.
func TestAutoSlowStartWithinTheCeiling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPartner(64, 20*time.Millisecond, 0, time.Second) // never queues
		r := newReplica(limitsWith(24, true), p, 3000)
		_, limits := run(r)
		if limits[0] != 2 {
			t.Errorf("first limit %d, want 2", limits[0])
		}
		at := -1
		for i, l := range limits {
			if l > 24 {
				t.Fatalf("limit %d above max_concurrency 24", l)
			}
			if l == 24 && at < 0 {
				at = i
			}
		}
		if at < 0 || at > 10 {
			t.Errorf("reached 24 after %d samples (100 ms each), want within a second: %v", at, limits)
		}
		if r.peak > 24 {
			t.Errorf("%d in flight, above 24", r.peak)
		}
	})
}

// Errors cut the limit at once, once per episode: attempts already in
// flight when the cut came do not cut it again.
func TestAutoCutsOnErrors(t *testing.T) {
	l := limitsWith(64, true)
	l.BreakerFailures = 100
	h := New(l, t0)
	h.auto.limit, h.auto.phase, h.auto.minRTT = 16, phaseSteady, 20*time.Millisecond
	now := t0
	var sent []time.Time
	for range 16 {
		ok, _ := h.Acquire(now)
		if !ok {
			t.Fatal("no slot below the limit")
		}
		sent = append(sent, now)
	}
	if ok, wake := h.Acquire(now); ok || !wake.IsZero() {
		t.Fatalf("Acquire at the limit: %v %v, want a wait for a release", ok, wake)
	}
	now = now.Add(30 * time.Millisecond)
	for _, s := range sent {
		h.Release(now, Result{Outcome: Failure, SentAt: s, Status: 503})
	}
	if got := h.Limit(); got != 8 {
		t.Errorf("after 16 503s of one episode: limit %d, want 8", got)
	}
	why := h.State(now.Add(2 * time.Minute)).ConcurrencyWhy
	if !strings.Contains(why, "cut by 503s 2 min ago from 16") {
		t.Errorf("why = %q", why)
	}
	ok, _ := h.Acquire(now)
	now = now.Add(30 * time.Millisecond)
	h.Release(now, Result{Outcome: Failure, SentAt: now.Add(-30 * time.Millisecond)})
	if got := h.Limit(); !ok || got != 4 {
		t.Errorf("after a new episode: limit %d, want 4", got)
	}
	if why := h.State(now).ConcurrencyWhy; !strings.Contains(why, "cut by errors just now from 8") {
		t.Errorf("why = %q", why)
	}
	for range 10 {
		h.Acquire(now)
		h.Release(now, Result{Outcome: Failure, SentAt: now})
		now = now.Add(time.Millisecond)
	}
	if got := h.Limit(); got != 1 {
		t.Errorf("limit %d after many errors, want the floor 1", got)
	}
}

// A partner that loses workers answers with 503s and slow requests; the
// limit follows it down and the 503s stop.
func TestAutoBacksOffWhenThePartnerShrinks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPartner(16, 20*time.Millisecond, 5*time.Millisecond, 100*time.Millisecond)
		r := newReplica(limitsWith(64, true), p, 4000)
		var before, after int
		go func() {
			time.Sleep(3 * time.Second)
			p.mu.Lock()
			before = p.rejected
			p.mu.Unlock()
			p.setWorkers(2)
			time.Sleep(5 * time.Second)
			p.mu.Lock()
			after = p.rejected
			p.mu.Unlock()
		}()
		_, limits := run(r)
		p.mu.Lock()
		end := p.rejected
		p.mu.Unlock()
		if before > 5 || end-after > 5 {
			t.Errorf("503s: %d before the partner shrank, %d well after, want few", before, end-after)
		}
		for i, l := range limits[50:80] { // 5 to 8 s: settled on 2 workers
			if l > 4 {
				t.Errorf("limit %d at %v against 2 workers", l, time.Duration(i+50)*100*time.Millisecond)
			}
		}
		t.Logf("503s %d in all, limits %v", end, limits)
	})
}

// The minimum RTT follows a partner that got slower for good, and the
// limit grows again when it speeds up.
func TestAutoFollowsThePartner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := acceptancePartner()
		r := newReplica(limitsWith(64, true), p, 20000)
		var slow, fast []int
		var whySlow string
		go func() {
			time.Sleep(5 * time.Second)
			p.setBase(60 * time.Millisecond)
			for range 100 { // 10 s
				time.Sleep(100 * time.Millisecond)
				slow = append(slow, r.limit())
			}
			whySlow = r.why()
			p.setBase(20 * time.Millisecond)
			p.setWorkers(16)
			for range 100 {
				time.Sleep(100 * time.Millisecond)
				fast = append(fast, r.limit())
			}
		}()
		run(r)
		if !strings.Contains(whySlow, "min RTT 6") {
			t.Errorf("10 s after the partner got slower: %q, want a min RTT of 6x ms", whySlow)
		}
		for i, l := range slow[50:] {
			if l < 3 || l > 8 {
				t.Errorf("slower partner: limit %d at +%v, want near 4", l, time.Duration(i+51)*100*time.Millisecond)
			}
		}
		if m := maxOf(fast); m < 12 {
			t.Errorf("16 workers: limit at most %d in 10 s, want >= 12: %v", m, fast)
		}
	})
}

// Every autoProbeEvery, the minimum is measured again at half the limit,
// and the limit comes back after.
func TestAutoReprobesTheMinimum(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := acceptancePartner()
		r := newReplica(limitsWith(64, true), p, 20000)
		var probed bool
		go func() {
			time.Sleep(autoProbeEvery - time.Second)
			for range 40 {
				time.Sleep(50 * time.Millisecond)
				if strings.Contains(r.why(), "re-measuring min RTT (was 22 ms)") {
					probed = true
				}
			}
		}()
		_, limits := run(r)
		if !probed {
			t.Error("no re-probe seen around autoProbeEvery")
		}
		after := limits[len(limits)*3/4:]
		if m := maxOf(after); m < 4 {
			t.Errorf("limits after the probe %v, want back near the knee", after)
		}
	})
}

// Three replicas that share the partner (each Take-ing slots the fleet
// granted, each with its own controller reacting to the shared latency)
// deliver within 1.25× of one replica at the hand-tuned concurrency,
// without 503s. Their slow starts overlap (three probes at 2, then 4
// each): the p99 service time is 55 ms against one replica's 25, far
// from a fixed 64's 315 ms.
func TestAutoThreeReplicas(t *testing.T) {
	fixed := simulate(t, limitsWith(4, false), 1500)
	synctest.Test(t, func(t *testing.T) {
		p := acceptancePartner()
		var rs []*replica
		for range 3 {
			r := newReplica(limitsWith(64, true), p, 500)
			r.take = true
			rs = append(rs, r)
		}
		took, _ := run(rs...)
		t.Logf("3 replicas: %v (one at fixed 4: %v), %d 503s, p99 %v, peaks %d %d %d", took, fixed.took, p.rejected, p.p99(), rs[0].peak, rs[1].peak, rs[2].peak)
		if took > fixed.took*5/4 || p.rejected > 30 || p.p99() > 4*20*time.Millisecond {
			t.Errorf("3 replicas: %v (fixed 4: %v), %d 503s, p99 %v", took, fixed.took, p.rejected, p.p99())
		}
	})
}

// Take refuses at the adaptive limit, with no wake time: a release pumps.
func TestTakeHoldsTheAdaptiveLimit(t *testing.T) {
	h := New(limitsWith(64, true), t0)
	for range 2 {
		if ok, _ := h.Take(t0); !ok {
			t.Fatal("Take refused below the limit")
		}
	}
	if ok, wake := h.Take(t0); ok || !wake.IsZero() {
		t.Errorf("Take at the limit: %v, wake %v; want refused, no wake", ok, wake)
	}
	h = New(limitsWith(64, false), t0)
	for range 10 {
		if ok, _ := h.Take(t0); !ok {
			t.Fatal("Take refused without auto")
		}
	}
}

// A host idle for autoIdle starts slow again; SetLimits keeps the limit
// under a new ceiling and drops it when auto is turned off.
func TestAutoIdleAndReload(t *testing.T) {
	h := New(limitsWith(64, true), t0)
	h.auto.limit, h.auto.phase, h.auto.minRTT = 20, phaseSteady, 20*time.Millisecond
	h.SetLimits(limitsWith(10, true), t0)
	if got := h.Limit(); got != 10 {
		t.Errorf("after max_concurrency 10: limit %d", got)
	}
	later := t0.Add(autoIdle)
	h.Acquire(later)
	if got := h.Limit(); got != 2 || !strings.Contains(h.State(later).ConcurrencyWhy, "measuring min RTT") {
		t.Errorf("after idling: limit %d (%q), want a new probe at 2", got, h.State(later).ConcurrencyWhy)
	}
	h.SetLimits(limitsWith(7, false), later)
	if st := h.State(later); st.Concurrency != 7 || st.ConcurrencyAuto || st.ConcurrencyWhy != "" {
		t.Errorf("fixed again: %+v", st)
	}
}

func maxOf(s []int) int {
	m := 0
	for _, v := range s {
		m = max(m, v)
	}
	return m
}

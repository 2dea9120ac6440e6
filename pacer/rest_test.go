package pacer

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// step is one moment of a host's life: time passes, then a send is
// tried and, if allowed, ends with an outcome.
type step struct {
	gap time.Duration
	r   Result
}

func script(seed uint64, n int) []step {
	rng := rand.New(rand.NewPCG(seed, 1))
	gaps := []time.Duration{0, 10 * time.Millisecond, 100 * time.Millisecond, time.Second, 40 * time.Second}
	out := make([]step, n)
	for i := range out {
		s := step{gap: gaps[rng.IntN(len(gaps))]}
		switch x := rng.IntN(100); {
		case x < 80:
			s.r.Outcome = Success
		case x < 86:
			s.r = Result{Outcome: Throttled, Status: 429}
			if x%2 == 0 {
				s.r.RetryAfter, s.r.HasRetry = 3*time.Second, true
			}
		case x < 96:
			s.r = Result{Outcome: Failure, Status: 503}
		default:
			s.r.Outcome = Answered
		}
		out[i] = s
	}
	return out
}

// play runs steps on h from now and records what each one saw.
func play(h *Host, now time.Time, steps []step) []State {
	var seen []State
	for _, s := range steps {
		now = now.Add(s.gap)
		if ok, _ := h.Acquire(now); ok {
			s.r.SentAt = now
			h.Release(now, s.r)
		}
		seen = append(seen, h.State(now))
	}
	return seen
}

// TestRestingHostRevivesTheSame: whenever a host says it is at rest, a
// host revived from its limits and clean count behaves as it does from
// then on, through the same sends, 429s, failures and pauses in time, and
// its State at rest is RestingState's.
func TestRestingHostRevivesTheSame(t *testing.T) {
	limits := []Limits{
		{Rate: 10, Burst: 20, Concurrency: 4, Adaptive: true, MinRate: 1,
			HoldSchedule: []time.Duration{2 * time.Second, 5 * time.Second}, MaxRetryAfter: time.Minute,
			BreakerFailures: 3, BreakerCooldown: 30 * time.Second},
		{Rate: 2, Burst: 1, Concurrency: 1, BreakerFailures: 2, BreakerCooldown: 10 * time.Second},
	}
	rests := 0
	for li, lim := range limits {
		for seed := range uint64(20) {
			steps := script(seed, 200)
			h := New(lim, t0)
			now := t0
			for i, s := range steps {
				now = now.Add(s.gap)
				if clean, ok := h.Resting(now); ok {
					rests++
					if got, want := RestingState(lim, now, clean), h.State(now); !reflect.DeepEqual(got, want) {
						t.Fatalf("limits %d seed %d step %d: resting state %+v, want %+v", li, seed, i, got, want)
					}
					same := *h // at rest a host holds no pointer of its own (episodes, adaptive limit)
					got := play(Revive(lim, now, clean), now, steps[i:])
					want := play(&same, now, steps[i:])
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("limits %d seed %d step %d: revived host differs from the one at rest", li, seed, i)
					}
				}
				if ok, _ := h.Acquire(now); ok {
					s.r.SentAt = now
					h.Release(now, s.r)
				}
			}
		}
	}
	if rests == 0 {
		t.Fatal("no host ever came to rest")
	}
}

// TestNotRestingWhileRemembering: a host in flight, paused, held, with a
// failure counted, a cut rate or an adaptive limit is not at rest.
func TestNotRestingWhileRemembering(t *testing.T) {
	lim := Limits{Rate: 10, Burst: 2, Concurrency: 2, Adaptive: true, MinRate: 1,
		HoldSchedule: []time.Duration{2 * time.Second}, BreakerFailures: 5, BreakerCooldown: time.Second}
	later := t0.Add(time.Hour)
	for _, c := range []struct {
		name string
		do   func(h *Host)
	}{
		{"in flight", func(h *Host) { h.Acquire(t0) }},
		{"paused", func(h *Host) { h.Pause() }},
		{"a failure counted", func(h *Host) { h.Acquire(t0); h.Release(t0, Result{Outcome: Failure, SentAt: t0}) }},
		{"after a 429", func(h *Host) { h.Acquire(t0); h.Release(t0, Result{Outcome: Throttled, SentAt: t0}) }},
		{"adaptive concurrency", func(h *Host) { h.SetLimits(Limits{Rate: 10, Burst: 2, Concurrency: 8, AutoConcurrency: true}, t0) }},
	} {
		h := New(lim, t0)
		c.do(h)
		if _, ok := h.Resting(later); ok {
			t.Errorf("%s: at rest an hour later", c.name)
		}
	}
	h := New(lim, t0)
	h.Acquire(t0)
	h.Release(t0, Result{Outcome: Success, SentAt: t0})
	if _, ok := h.Resting(t0); ok {
		t.Error("at rest with its bucket short")
	}
	if clean, ok := h.Resting(later); !ok || clean != 1 {
		t.Errorf("after one success and an hour: Resting = %d, %v; want 1, true", clean, ok)
	}
}

package fleet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
	"github.com/hookpace/hookpace/pacer"
	"github.com/redis/go-redis/v9"
)

// The rules of pacing live twice: pacer.Host for a replica alone and
// ask.lua for a fleet. TestPacerParity drives both through the same
// scripts of outcomes and asserts that they grant, hold and rate alike, so
// that neither can drift on its own (the AIMD step once waited for
// max(10, burst) successes in Go and max(10, capacity) in Lua). A move may
// also flush Redis (a restart without persistence): ask.lua then restores
// what the replica remembers, and must go on as pacer.Host, which lost
// nothing.

// move is one step of a script: time passes, Redis loses its state, the
// host is paused or resumed, the oldest attempts in flight finish, a
// partner's quota is used up, then up to ask sends are asked for.
type move struct {
	after  time.Duration
	flush  bool
	pause  bool
	resume bool
	finish []finish
	quota  time.Duration // a quota used up, reset this far ahead
	ask    int
}

type finish struct {
	out   pacer.Outcome
	retry time.Duration
	has   bool
}

var (
	ok200 = finish{out: pacer.Success}
	f5xx  = finish{out: pacer.Failure}
	t429  = finish{out: pacer.Throttled}
)

func ra(d time.Duration) finish { return finish{out: pacer.Throttled, retry: d, has: true} }

func times(n int, m move) []move {
	s := make([]move, n)
	for i := range s {
		s[i] = m
	}
	return s
}

func script(parts ...any) []move {
	var s []move
	for _, p := range parts {
		switch p := p.(type) {
		case move:
			s = append(s, p)
		case []move:
			s = append(s, p...)
		}
	}
	return s
}

// attempt is one send in flight: the fleet's lease and when it was sent.
type attempt struct {
	lease string
	sent  time.Time
}

// twin is one host paced by pacer.Host and by ask.lua side by side.
type twin struct {
	t    *testing.T
	lim  pacer.Limits
	clk  *clock
	rdb  *redis.Client
	l    *Limiter
	host *pacer.Host
	name string
	out  []attempt
}

func (w *twin) step(i int, m move) {
	t := w.t
	t.Helper()
	w.clk.Add(m.after)
	now := w.clk.Now()
	ctx := context.Background()
	if m.flush {
		if err := w.rdb.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if m.pause {
		w.host.Pause()
		if err := w.l.Pause(ctx, w.name); err != nil {
			t.Fatal(err)
		}
	}
	if m.resume {
		w.host.Resume()
		if err := w.l.Resume(ctx, w.name); err != nil {
			t.Fatal(err)
		}
	}
	var rels []Release
	if len(m.finish) > len(w.out) {
		t.Fatalf("step %d: %d attempts to finish, %d in flight", i, len(m.finish), len(w.out))
	}
	for _, f := range m.finish {
		a := w.out[0]
		w.out = w.out[1:]
		w.host.Release(now, pacer.Result{Outcome: f.out, RetryAfter: f.retry, HasRetry: f.has, SentAt: a.sent})
		rels = append(rels, Release{Lease: a.lease, Outcome: f.out, RetryAfter: f.retry, HasRetry: f.has, Age: now.Sub(a.sent)})
	}
	if m.quota > 0 {
		// As deliver shares it: the local host holds, the fleet gets a
		// release that sent nothing, with the hold.
		if w.host.Quota(now, 0, now.Add(m.quota)) {
			rels = append(rels, Release{Outcome: pacer.NoSend, RetryAfter: w.host.State(now).HeldUntil.Sub(now), HasRetry: true})
		}
	}
	granted, wake := 0, time.Time{}
	for granted < m.ask {
		ok, wk := w.host.Acquire(now)
		if !ok {
			wake = wk
			break
		}
		granted++
	}
	g, err := w.l.Ask(ctx, Request{Host: w.name, Limits: w.lim, Want: m.ask, Releases: rels})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range g.Leases {
		w.out = append(w.out, attempt{lease: id, sent: now})
	}
	st := w.host.State(now)
	at := fmt.Sprintf("step %d (%+v)", i, m)
	if granted != len(g.Leases) {
		t.Fatalf("%s: pacer granted %d, ask.lua %d (%+v)", at, granted, len(g.Leases), g)
	}
	if granted < m.ask {
		if wake.IsZero() != g.Poll {
			t.Fatalf("%s: pacer wakes at %v, ask.lua polls=%v wait %v", at, wake, g.Poll, g.Wait)
		}
		// Go rounds the wait up to the nanosecond, Lua to the microsecond
		// (with 2 µs of slack for its stored rounding).
		if d := wake.Sub(now) - g.Wait; !wake.IsZero() && (d < -3*time.Microsecond || d > 3*time.Microsecond) {
			t.Fatalf("%s: pacer waits %v, ask.lua %v", at, wake.Sub(now), g.Wait)
		}
	}
	var held time.Duration
	if !st.HeldUntil.IsZero() {
		held = st.HeldUntil.Sub(now)
	}
	if held != g.HeldFor {
		t.Fatalf("%s: pacer held for %v, ask.lua %v", at, held, g.HeldFor)
	}
	if held > 0 && !st.Paused && st.HoldReason != g.Reason && m.ask > 0 {
		t.Fatalf("%s: pacer holds for %q, ask.lua %q", at, st.HoldReason, g.Reason)
	}
	if st.Rate != g.Rate {
		t.Fatalf("%s: pacer rate %v, ask.lua %v", at, st.Rate, g.Rate)
	}
	if st.Consecutive429 != g.C429 || st.Breaker != g.Breaker || st.Paused != g.Paused {
		t.Fatalf("%s: pacer 429s %d breaker %s paused %v, ask.lua %d %s %v", at,
			st.Consecutive429, st.Breaker, st.Paused, g.C429, g.Breaker, g.Paused)
	}
}

func TestPacerParity(t *testing.T) {
	srv := redistest.Start(t)
	base := pacer.Limits{Rate: 10, Burst: 5, Concurrency: 100, Adaptive: true, MinRate: 1,
		HoldSchedule: []time.Duration{time.Second, 4 * time.Second}, MaxRetryAfter: time.Minute,
		BreakerFailures: 3, BreakerCooldown: 10 * time.Second}
	fast := base
	fast.Rate, fast.Burst, fast.MinRate = 1000, 100, 10 // capacity 75: the streak is the burst's
	conc2 := base
	conc2.Concurrency = 2
	scripts := []struct {
		name  string
		lim   pacer.Limits
		moves []move
	}{
		{"burst then rate", base, script(
			move{ask: 8},
			move{after: 50 * time.Millisecond, ask: 2},
			move{after: 52 * time.Millisecond, ask: 2},
			move{after: time.Second, finish: []finish{ok200, ok200, ok200, ok200, ok200}, ask: 20},
		)},
		{"concurrency", conc2, script(
			move{ask: 3},
			move{finish: []finish{ok200}, ask: 3},
			move{after: time.Second, finish: []finish{ok200, ok200}, ask: 3},
		)},
		{"429 with Retry-After, stragglers, gentle resume", base, script(
			move{ask: 3},
			move{finish: []finish{ra(3 * time.Second)}, ask: 1},
			move{after: time.Second, finish: []finish{t429}, ask: 1},
			move{finish: []finish{ra(5 * time.Second)}, ask: 1},
			move{after: 5 * time.Second, ask: 3},
			move{after: time.Second, finish: []finish{ok200}, ask: 5},
			move{finish: []finish{ra(time.Hour)}},
		)},
		{"429 without Retry-After escalates by the schedule", base, script(
			move{ask: 1},
			move{finish: []finish{t429}, ask: 1},
			move{after: time.Second, ask: 1},
			move{finish: []finish{t429}, ask: 1},
			move{after: 4 * time.Second, ask: 1},
			move{finish: []finish{t429}, ask: 1},
			move{after: 4 * time.Second, ask: 1},
			move{after: time.Second, finish: []finish{ok200}, ask: 1},
			move{finish: []finish{t429}, ask: 1},
		)},
		{"AIMD at burst 5: a step per 10 successes", base, script(
			move{ask: 1},
			move{finish: []finish{t429}},
			move{after: time.Second, ask: 1},
			times(45, move{after: time.Second, finish: []finish{ok200}, ask: 1}),
		)},
		{"AIMD at 1000/s burst 100: a step per 100 successes", fast, script(
			move{ask: 1},
			move{finish: []finish{t429}},
			move{after: time.Second, ask: 1},
			times(230, move{after: 10 * time.Millisecond, finish: []finish{ok200}, ask: 1}),
		)},
		{"5xx streak to the breaker, probe fails, probe succeeds", base, script(
			move{ask: 1},
			move{after: time.Second, finish: []finish{f5xx}, ask: 1},
			move{after: time.Second, finish: []finish{f5xx}, ask: 1},
			move{finish: []finish{ok200}, ask: 2},
			move{after: time.Second, finish: []finish{f5xx}},
			move{finish: []finish{f5xx}, ask: 1},
			move{after: time.Second, finish: []finish{f5xx}, ask: 1},
			move{after: 10 * time.Second, ask: 2},
			move{ask: 1},
			move{finish: []finish{f5xx}, ask: 1},
			move{after: 10 * time.Second, ask: 1},
			move{finish: []finish{ok200}, ask: 3},
		)},
		{"quota hold", base, script(
			move{ask: 2},
			move{finish: []finish{ok200}, quota: 2 * time.Second, ask: 1},
			move{after: time.Second, finish: []finish{ok200}, quota: 500 * time.Millisecond, ask: 1},
			move{after: time.Second, ask: 5},
			move{after: time.Second, finish: []finish{ok200}, ask: 5},
		)},
		{"state lost mid-burst", base, script(
			move{ask: 3},
			move{after: 50 * time.Millisecond, ask: 1},
			move{flush: true, ask: 2},
			move{after: 120 * time.Millisecond, finish: []finish{ok200, ok200}, ask: 3},
			move{after: 30 * time.Millisecond, flush: true, finish: []finish{ok200}, ask: 3},
			move{after: time.Second, ask: 10},
		)},
		{"state lost with attempts in flight", conc2, script(
			move{ask: 2},
			move{after: time.Second, flush: true, ask: 2},
			move{finish: []finish{ok200}, ask: 2},
			move{after: time.Second, ask: 2},
			move{flush: true, finish: []finish{ok200, ok200}, ask: 2},
		)},
		{"pause and resume", base, script(
			move{ask: 1},
			move{pause: true, ask: 1},
			move{after: time.Second, finish: []finish{ok200}, ask: 1},
			move{resume: true, ask: 1},
			move{pause: true, finish: []finish{t429}, ask: 1},
			move{after: 2 * time.Second, resume: true, ask: 1},
		)},
	}
	for i, sc := range scripts {
		t.Run(sc.name, func(t *testing.T) {
			clk := newClock()
			w := &twin{t: t, lim: sc.lim, clk: clk, rdb: rawClient(t, srv), l: newLimiter(t, srv, clk, "parity"),
				host: pacer.New(sc.lim, clk.Now()), name: fmt.Sprintf("parity-%d.example", i)}
			for j, m := range sc.moves {
				w.step(j, m)
			}
		})
	}
}

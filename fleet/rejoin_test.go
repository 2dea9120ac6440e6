package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/internal/redistest"
	"github.com/hookpace/hookpace/pacer"
)

// TestRejoinTogether: Redis restarted empty while three replicas paced
// alone. The first to hear it again sets the rejoin time; each keeps its
// share of 3 until then (Redis counts fewer), the later ones until the
// same time, and all are shared again at it.
func TestRejoinTogether(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	ctx := context.Background()
	ls := []*Limiter{newLimiter(t, srv, clk, "a"), newLimiter(t, srv, clk, "b"), newLimiter(t, srv, clk, "c")}
	for _, l := range ls {
		if err := l.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range ls { // every one knows the fleet is three
		l.Heartbeat(ctx)
	}
	srv.Kill()
	for _, l := range ls {
		if err := l.Heartbeat(ctx); err == nil {
			t.Fatal("heartbeat answered with redis down")
		}
	}
	srv.Restart()
	wait := ls[0].rejoinWait()
	if err := ls[0].Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Add(wait / 2)
	if err := ls[1].Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	for _, l := range ls[:2] {
		if deg, live, _ := l.State(); !deg || live != 3 {
			t.Fatalf("%s before the rejoin: degraded %v, live %d; want its share of 3", l.Replica(), deg, live)
		}
	}
	// b heard Redis wait/2 later on the scripts' clock (real time barely
	// moved): the same rejoin time is wait/2 nearer for it.
	if d := ls[0].rejoinAt.Sub(ls[1].rejoinAt) - wait/2; d > wait/10 || d < -wait/10 {
		t.Fatalf("b's rejoin %v off the one a set", d)
	}
	clk.Add(wait/2 + 1)
	for _, l := range ls {
		if err := l.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		if deg, _, _ := l.State(); deg {
			t.Fatalf("%s still degraded at the rejoin time", l.Replica())
		}
	}
	if _, live, _ := ls[2].State(); live != 3 {
		t.Fatalf("live %d after the rejoin, want 3", live)
	}
}

// busy is a backlog that always has more to send.
type busy struct{}

func (busy) Due(time.Time) int    { return 100 }
func (busy) Empty(time.Time) bool { return false }

// TestNoShareStartsAfterRejoin: a host that paced on its share has an
// attempt out when Redis answers again. It starts no more on its share
// (Redis would not count it, and a backlog would keep it there for as
// long as it lasts), has Redis count the one out, and is shared again
// when the fleet rejoins: it asks the fleet for more, beside it.
func TestNoShareStartsAfterRejoin(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	ctx := context.Background()
	l := newLimiter(t, srv, clk, "a")
	if err := l.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	gs := NewGates(l, nil)
	wake, woke := woken()
	gs.Bind(wake, func(string, bool) {})
	g := gs.Gate("partner.example", pacer.Limits{Rate: 100, Burst: 10, Concurrency: 4}, time.Now(), busy{})
	srv.Kill()
	if err := l.Heartbeat(ctx); err == nil {
		t.Fatal("heartbeat answered with redis down")
	}
	later := time.Now().Add(time.Second) // the drained share has filled again
	ok, _, lease := g.Acquire(later)
	if !ok || lease != "" {
		t.Fatalf("degraded: acquire %v lease %q, want a slot on the share", ok, lease)
	}
	srv.Restart()
	if err := l.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := g.Acquire(later.Add(time.Second)); ok {
		t.Fatal("Redis answers: another attempt started on the share")
	}
	waitWoken(t, woke, "the attempt counted", func() bool { return l.uncountedNow() == 0 })
	if err := l.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if deg, _, _ := l.State(); deg {
		t.Fatal("still degraded after the rejoin")
	}
	if ok, wake, _ := g.Acquire(later.Add(time.Second)); ok || !wake.IsZero() {
		t.Fatalf("shared again: acquire %v wake %v, want an ask to the fleet", ok, wake)
	}
	g.Release(time.Now(), "", pacer.Result{Outcome: pacer.Success, SentAt: time.Now()})
	var st deliver.HostStatus
	g.Status(time.Now(), &st)
	if st.Fleet != "shared" {
		t.Fatalf("after the attempt on the share ended: %q, want shared", st.Fleet)
	}
}

// woken is a dispatcher's wake for tests: it applies at once and tells
// each application on a channel.
func woken() (func(apply func() []string), chan struct{}) {
	ch := make(chan struct{}, 64)
	return func(apply func() []string) {
		apply()
		select {
		case ch <- struct{}{}:
		default:
		}
	}, ch
}

// waitWoken waits for cond, checked after each application of a wake.
func waitWoken(t *testing.T, ch chan struct{}, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("no wake after 30 s waiting for %s", what)
		}
	}
}

// TestRejoinCountsShareAttempts: two replicas paced alone on their share
// (concurrency 2 of 4) while Redis was away, and b still has its two
// attempts out when Redis answers again, empty. Those count toward the
// cap: a, shared again, is granted at most the two slots left, however
// long b's attempts outlast the rejoin.
func TestRejoinCountsShareAttempts(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	ctx := context.Background()
	a, b := newLimiter(t, srv, clk, "a"), newLimiter(t, srv, clk, "b")
	for range 2 {
		for _, l := range []*Limiter{a, b} {
			if err := l.Heartbeat(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	lim := pacer.Limits{Rate: 100, Burst: 10, Concurrency: 4}
	gates := func(l *Limiter) (deliver.Gate, chan struct{}) {
		gs := NewGates(l, nil)
		wake, ch := woken()
		gs.Bind(wake, func(string, bool) {})
		return gs.Gate("partner.example", lim, time.Now(), busy{}), ch
	}
	ga, cha := gates(a)
	gb, chb := gates(b)
	srv.Kill()
	for _, l := range []*Limiter{a, b} {
		if err := l.Heartbeat(ctx); err == nil {
			t.Fatal("heartbeat answered with redis down")
		}
	}
	later := time.Now().Add(time.Second) // the drained share has filled again
	for i := range 2 {
		if ok, _, lease := gb.Acquire(later); !ok || lease != "" {
			t.Fatalf("b degraded, attempt %d: acquire %v lease %q, want a slot on its share", i, ok, lease)
		}
	}
	srv.Restart()
	if err := a.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := gb.Acquire(later.Add(time.Second)); ok {
		t.Fatal("b started another attempt on its share after Redis answered")
	}
	waitWoken(t, chb, "b's attempts counted", func() bool { return b.uncountedNow() == 0 })
	// Both are back (b with its attempts counted): the fleet rejoins,
	// however late their heartbeats come (within a lease period: b's
	// attempts' leases are renewed on the wall clock, not this one).
	clk.Add(3 * time.Second)
	for _, l := range []*Limiter{b, a} {
		if err := l.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		if deg, _, _ := l.State(); deg {
			t.Fatalf("%s still degraded at the rejoin", l.Replica())
		}
	}
	now := later.Add(2 * time.Second)
	ga.Acquire(now) // asks the fleet
	waitWoken(t, cha, "a's ask answered", func() bool { return ga.(*gate).answeredOnce() })
	got := 0
	for {
		ok, _, lease := ga.Acquire(now)
		if !ok {
			break
		}
		if lease == "" {
			t.Fatal("a shared again started an attempt without a lease")
		}
		got++
	}
	if got+2 > 4 {
		t.Fatalf("a was granted %d slots beside b's 2 attempts still out: %d at once, cap 4", got, got+2)
	}
}

// answeredOnce reports whether an answer of the fleet reached g.
func (g *gate) answeredOnce() bool {
	g.gs.mu.Lock()
	defer g.gs.mu.Unlock()
	_, at := g.fl.Last()
	return !at.IsZero()
}

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
// attempt out when the fleet is shared again. It starts no more on its
// share (a backlog would keep it there for as long as it lasts, beside
// the others' shared limits), and asks the fleet once the attempt ends.
func TestNoShareStartsAfterRejoin(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	ctx := context.Background()
	l := newLimiter(t, srv, clk, "a")
	if err := l.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	gs := NewGates(l, nil)
	gs.Bind(func(apply func() []string) { apply() }, func(string, bool) {})
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
	clk.Add(l.rejoinWait() + 1)
	if err := l.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if deg, _, _ := l.State(); deg {
		t.Fatal("still degraded after the rejoin")
	}
	if ok, wake, _ := g.Acquire(later.Add(time.Second)); ok || !wake.IsZero() {
		t.Fatalf("shared again with an attempt out on the share: acquire %v wake %v, want none until it ends", ok, wake)
	}
	g.Release(time.Now(), "", pacer.Result{Outcome: pacer.Success, SentAt: time.Now()})
	var st deliver.HostStatus
	g.Status(time.Now(), &st)
	if st.Fleet != "shared" {
		t.Fatalf("after the attempt on the share ended: %q, want shared", st.Fleet)
	}
}

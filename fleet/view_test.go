package fleet

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
	"github.com/hookpace/hookpace/pacer"
)

// summaries is a replica's summary that a test changes.
type summaries struct {
	mu sync.Mutex
	s  []HostSummary
}

func (s *summaries) get() []HostSummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]HostSummary(nil), s.s...)
}

func (s *summaries) set(v []HostSummary) {
	s.mu.Lock()
	s.s = v
	s.mu.Unlock()
}

func beat(t *testing.T, ls ...*Limiter) {
	t.Helper()
	for _, l := range ls {
		if err := l.Heartbeat(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := l.publishView(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// allPages reads the whole view limit hosts at a time.
func allPages(t *testing.T, l *Limiter, limit int) []FleetHost {
	t.Helper()
	var out []FleetHost
	cursor := ""
	for range 100 {
		p, err := l.View(context.Background(), cursor, limit)
		if err != nil {
			t.Fatal(err)
		}
		if limit > 0 && len(p.Hosts) > limit {
			t.Fatalf("page of %d hosts, limit %d", len(p.Hosts), limit)
		}
		out = append(out, p.Hosts...)
		if p.NextCursor == "" {
			return out
		}
		cursor = p.NextCursor
	}
	t.Fatal("no last page")
	return nil
}

// TestFleetView: three replicas publish different queues; any replica's
// view merges them, a page at a time, with each one's part; a change is
// seen at the next heartbeat; a replica that stops is left out, and one
// whose set Redis lost sends it whole again, and says that it found a
// host's state lost.
func TestFleetView(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	names := []string{"a", "b", "c"}
	var ls []*Limiter
	var sums []*summaries
	for i, n := range names {
		l := newLimiter(t, srv, clk, n)
		s := &summaries{}
		var hs []HostSummary
		for h := range 5 {
			if h%3 == i%3 && h != 0 {
				continue // not every replica knows every host
			}
			hs = append(hs, HostSummary{Host: fmt.Sprintf("h%d.example", h), Queued: int64(10*i + h), InFlight: 1, Delivered: 100})
		}
		s.set(hs)
		l.Summarize(s.get)
		ls, sums = append(ls, l), append(sums, s)
	}
	beat(t, ls...)
	want := map[string]int64{}
	for _, s := range sums {
		for _, h := range s.get() {
			want[h.Host] += h.Queued
		}
	}
	for _, limit := range []int{0, 1, 2, 3, 10} {
		got := allPages(t, ls[1], limit)
		if len(got) != len(want) {
			t.Fatalf("limit %d: %d hosts, want %d: %+v", limit, len(got), len(want), got)
		}
		for i, h := range got {
			if h.Queued != want[h.Host] || (i > 0 && got[i-1].Host >= h.Host) {
				t.Fatalf("limit %d: %+v, want queued %d, sorted", limit, h, want[h.Host])
			}
		}
	}
	h0 := allPages(t, ls[0], 1)[0]
	if h0.Host != "h0.example" || len(h0.Replicas) != 3 || h0.Queued != 30 || h0.Delivered != 300 || h0.InFlight != 3 {
		t.Fatalf("h0: %+v", h0)
	}

	sums[2].set([]HostSummary{{Host: "h0.example", Queued: 7, Paused: true, Held: "429"}})
	beat(t, ls[2])
	h0 = allPages(t, ls[0], 1)[0]
	if h0.Queued != 17 || !h0.Paused || h0.Held != "429" || h0.Replicas[2].Queued != 7 {
		t.Fatalf("after c's change: %+v", h0)
	}

	ls[2].Close()
	clk.Add(11 * time.Second) // a's and b's heartbeats lapse too: beat again
	beat(t, ls[0], ls[1])
	if p, _ := ls[0].View(context.Background(), "", 0); len(p.Replicas) != 2 || p.Hosts[0].Queued != 10 || len(p.Hosts[0].Replicas) != 2 {
		t.Fatalf("after c left: %+v", p)
	}

	lim := pacer.Limits{Rate: 10, Burst: 5, Concurrency: 3}
	askHost(t, ls[0], "p.example", lim, 1)
	if err := rawClient(t, srv).FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	askHost(t, ls[0], "p.example", lim, 1) // finds p.example's state lost
	beat(t, ls[0], ls[1])
	if got := allPages(t, ls[1], 2); len(got) != 5 {
		t.Fatalf("after redis lost the view: %d hosts, want 5 (sent whole again)", len(got))
	}
	p, err := ls[1].View(context.Background(), "", 1)
	if err != nil || len(p.Lost) != 1 || p.Lost[0].Replica != "a" || p.Lost[0].Times != 1 || !p.Lost[0].Last.Equal(clk.Now().Truncate(time.Second)) {
		t.Fatalf("state lost in the view: %+v (%v), want a once", p.Lost, err)
	}
}

package spool

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// lanedMsg is newMsg in lane (key, p).
func lanedMsg(host string, i int, key string, p Priority) *Message {
	m := newMsg(host, i)
	m.Fairness, m.Priority = key, p
	return m
}

func appendAll(t *testing.T, s *Spool, ms ...*Message) {
	t.Helper()
	for _, m := range ms {
		if err := s.Append(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
	}
}

func ids(ms []*Message) []uint64 {
	out := make([]uint64, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// checkLanes compares host's lanes with want, and its fairness keys'
// counts with keys.
func checkLanes(t *testing.T, s *Spool, host string, want []LaneUsage, keys map[string]int) {
	t.Helper()
	if got := s.Lanes(host); !reflect.DeepEqual(got, want) {
		t.Fatalf("lanes of %s: %+v, want %+v", host, got, want)
	}
	for k, n := range keys {
		if q, nk := s.KeyQueued(host, k); q != n || nk != len(keys) {
			t.Fatalf("KeyQueued(%q, %q) = %d, %d keys; want %d, %d", host, k, q, nk, n, len(keys))
		}
	}
}

// Laned webhooks are read lane by lane, in id order, and counted per lane
// and per fairness key; Lane{} is what Read reads, as before lanes.
func TestReadLaneAndCounts(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	h := "a.example"
	plain := newMsg(h, 0)
	a1, a2 := lanedMsg(h, 1, "A", PriorityNormal), lanedMsg(h, 2, "A", PriorityNormal)
	aHigh := lanedMsg(h, 3, "A", PriorityHigh)
	b1 := lanedMsg(h, 4, "B", PriorityLow)
	low := lanedMsg(h, 5, "", PriorityLow)
	ordered := lanedMsg(h, 6, "", PriorityHigh) // an ordering key waits at normal priority
	ordered.Ordering = "order-1"
	appendAll(t, s, plain, a1, aHigh, a2, b1, low, ordered)

	for _, c := range []struct {
		lane Lane
		want []uint64
	}{
		{Lane{}, []uint64{plain.ID, ordered.ID}},
		{Lane{Key: "A"}, []uint64{a1.ID, a2.ID}},
		{Lane{Key: "A", Priority: PriorityHigh}, []uint64{aHigh.ID}},
		{Lane{Key: "B", Priority: PriorityLow}, []uint64{b1.ID}},
		{Lane{Priority: PriorityLow}, []uint64{low.ID}},
		{Lane{Key: "C"}, []uint64{}},
	} {
		ms, err := s.ReadLane(h, c.lane, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(ms); !reflect.DeepEqual(got, c.want) {
			t.Fatalf("lane %+v: %v, want %v", c.lane, got, c.want)
		}
		for _, m := range ms {
			if m.Lane() != c.lane || m.size == 0 {
				t.Fatalf("lane %+v: read %+v", c.lane, m)
			}
		}
	}
	if ms, _ := s.ReadLane(h, Lane{Key: "A"}, a1.ID, 100); !reflect.DeepEqual(ids(ms), []uint64{a2.ID}) {
		t.Fatalf("lane A after %d: %v", a1.ID, ids(ms))
	}
	if ms, _ := s.Read(h, 0, 100); !reflect.DeepEqual(ids(ms), []uint64{plain.ID, ordered.ID}) {
		t.Fatalf("Read: %v", ids(ms))
	}
	checkLanes(t, s, h, []LaneUsage{
		{Lane{}, 2}, {Lane{Priority: PriorityLow}, 1},
		{Lane{Key: "A", Priority: PriorityHigh}, 1}, {Lane{Key: "A"}, 2},
		{Lane{Key: "B", Priority: PriorityLow}, 1},
	}, map[string]int{"": 3, "A": 3, "B": 1})
	if q, n := s.KeyQueued("other.example", "A"); q != 0 || n != 0 {
		t.Fatalf("KeyQueued of a host with nothing queued: %d, %d", q, n)
	}

	got, err := s.Get(h, Lane{Key: "A", Priority: PriorityHigh}, aHigh.ID)
	if err != nil || got.ID != aHigh.ID || string(got.Body) != string(aHigh.Body) {
		t.Fatalf("Get: %+v, %v", got, err)
	}
	if _, err := s.Get(h, Lane{Key: "A"}, aHigh.ID); !errors.Is(err, ErrNotQueued) {
		t.Fatalf("Get in the wrong lane: %v", err)
	}
	if err := s.Delete(got); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(h, aHigh.Lane(), aHigh.ID); !errors.Is(err, ErrNotQueued) {
		t.Fatalf("Get after delete: %v", err)
	}
	if q, _ := s.KeyQueued(h, "A"); q != 2 || s.Usage().Messages != 6 {
		t.Fatalf("after delete: key A %d, usage %d", q, s.Usage().Messages)
	}
}

// A fairness key the key layout cannot hold is refused, not stored.
func TestFairnessKeyRefused(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	for _, key := range []string{"a\x00b", "a\nb", strings.Repeat("x", MaxFairnessKey+1)} {
		err := s.Append(context.Background(), lanedMsg("a.example", 1, key, 0), 0)
		if !errors.Is(err, ErrFairnessKey) {
			t.Fatalf("key of %d bytes: %v", len(key), err)
		}
	}
	if u := s.Usage(); u.Messages != 0 {
		t.Fatalf("usage %d after refusals", u.Messages)
	}
}

// Burying, dropping, replaying and deleting laned webhooks remove (or
// write) the right key and keep the counts; a replayed dead letter keeps
// its lane.
func TestLanedBuryDropReplay(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	h := "a.example"
	a1, a2, a3 := lanedMsg(h, 1, "A", PriorityHigh), lanedMsg(h, 2, "A", PriorityHigh), lanedMsg(h, 3, "A", PriorityHigh)
	a3.Ordering = "o" // lane A, normal priority
	appendAll(t, s, a1, a2, a3)
	ms, _ := s.ReadLane(h, Lane{Key: "A", Priority: PriorityHigh}, 0, 10)
	if len(ms) != 2 {
		t.Fatalf("read %d", len(ms))
	}
	s.Bury(ms[0], "max_attempts", time.Now())
	if n, err := s.Drop(ms[1:], "test"); n != 1 || err != nil {
		t.Fatalf("drop: %d, %v", n, err)
	}
	waitUsage(t, s, 1)
	checkLanes(t, s, h, []LaneUsage{{Lane{Key: "A"}, 1}}, map[string]int{"A": 1})
	if ms, _ := s.ReadLane(h, Lane{Key: "A", Priority: PriorityHigh}, 0, 10); len(ms) != 0 {
		t.Fatalf("lane still holds %v", ids(ms))
	}
	if n, err := s.ReplayDead(DeadFilter{}); n != 1 || err != nil {
		t.Fatalf("replay: %d, %v", n, err)
	}
	ms, _ = s.ReadLane(h, Lane{Key: "A", Priority: PriorityHigh}, 0, 10)
	if len(ms) != 1 || ms[0].OriginID() != a1.ID || ms[0].Fairness != "A" || ms[0].Priority != PriorityHigh {
		t.Fatalf("replayed: %+v", ms)
	}
	checkLanes(t, s, h, []LaneUsage{{Lane{Key: "A", Priority: PriorityHigh}, 1}, {Lane{Key: "A"}, 1}}, map[string]int{"A": 2})
	rest, _ := s.ReadLane(h, Lane{Key: "A"}, 0, 10)
	if err := s.DeleteAll(append(ms, rest...)); err != nil {
		t.Fatal(err)
	}
	checkLanes(t, s, h, nil, nil)
	if q, n := s.KeyQueued(h, "A"); q != 0 || n != 0 || s.Usage().Messages != 0 || s.Usage().Bytes != 0 {
		t.Fatalf("emptied: key A %d, %d keys, usage %+v", q, n, s.Usage())
	}
}

// A coalesced update keeps the lane of the webhook it replaces (its
// place), whatever lane it asked for, and adds no message to any lane.
func TestCoalesceKeepsLane(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	h := "a.example"
	first := lanedMsg(h, 1, "A", PriorityLow)
	if how, err := s.AppendKeys(context.Background(), first, 0, Keys{Coalesce: "c"}); how != Stored || err != nil {
		t.Fatalf("first: %v, %v", how, err)
	}
	update := lanedMsg(h, 2, "B", PriorityHigh)
	update.Body = []byte("v2")
	if how, err := s.AppendKeys(context.Background(), update, 0, Keys{Coalesce: "c"}); how != Coalesced || err != nil {
		t.Fatalf("update: %v, %v", how, err)
	}
	if update.ID != first.ID || update.Lane() != first.Lane() {
		t.Fatalf("update: id %d lane %+v, want %d %+v", update.ID, update.Lane(), first.ID, first.Lane())
	}
	ms, _ := s.ReadLane(h, first.Lane(), 0, 10)
	if len(ms) != 1 || string(ms[0].Body) != "v2" {
		t.Fatalf("lane of the first: %+v", ms)
	}
	checkLanes(t, s, h, []LaneUsage{{Lane{Key: "A", Priority: PriorityLow}, 1}}, map[string]int{"A": 1})
	if u := s.Usage(); u.Messages != 1 || u.Bytes != ms[0].size {
		t.Fatalf("usage %+v, record %d bytes", u, ms[0].size)
	}
	if err := s.Delete(ms[0]); err != nil {
		t.Fatal(err)
	}
	// With its target gone, the key queues its next update anew, in the
	// update's own lane.
	again := lanedMsg(h, 3, "B", PriorityHigh)
	if how, err := s.AppendKeys(context.Background(), again, 0, Keys{Coalesce: "c"}); how != Stored || err != nil {
		t.Fatalf("again: %v, %v", how, err)
	}
	next := lanedMsg(h, 4, "", 0)
	if how, err := s.AppendKeys(context.Background(), next, 0, Keys{Coalesce: "c"}); how != Coalesced || err != nil || next.Lane() != again.Lane() {
		t.Fatalf("next: %v, %v, lane %+v", how, err, next.Lane())
	}
	checkLanes(t, s, h, []LaneUsage{{Lane{Key: "B", Priority: PriorityHigh}, 1}}, map[string]int{"B": 1})
}

// One rule for lane keys, with the caller's limit, never above what the
// spool stores.
func TestCheckLaneKey(t *testing.T) {
	for _, tt := range []struct {
		key string
		max int
		ok  bool
	}{
		{"tenant-a", 8, true}, {"tenant-a", 7, false}, {"a b/c:d", 200, true}, {"ü", 2, true},
		{strings.Repeat("x", MaxFairnessKey), MaxFairnessKey, true},
		{strings.Repeat("x", MaxFairnessKey+1), MaxFairnessKey + 10, false},
		{"", 200, false}, {"a\nb", 200, false}, {"a\x7f", 200, false}, {"\x00", 200, false},
	} {
		if err := CheckLaneKey(tt.key, tt.max); (err == nil) != tt.ok {
			t.Errorf("CheckLaneKey(%q, %d) = %v, want ok %v", tt.key, tt.max, err, tt.ok)
		}
	}
}

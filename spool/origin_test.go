package spool

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestReplayKeepsOriginID: a replayed dead letter is queued under a new id
// at the tail of its host's queue, but keeps the id the app got with its
// 202, across a restart and a second death, and is listed, replayed and
// purged by it. The dead letters are counted per host throughout.
func TestReplayKeepsOriginID(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{})
	ctx := context.Background()
	a, b := newMsg("a.example", 1), newMsg("b.example", 2)
	for _, m := range []*Message{a, b} {
		if err := s.Append(ctx, m, 0); err != nil {
			t.Fatal(err)
		}
	}
	origin := a.ID
	now := time.Unix(1700000100, 0)
	s.Bury(a, "permanent status 410", now)
	s.Bury(b, "permanent status 410", now)
	flush(t, s)
	deadHosts := func(want string) {
		t.Helper()
		got, err := s.DeadByHost()
		if err != nil || fmt.Sprint(got) != want {
			t.Fatalf("dead letters per host %v (%v), want %s", got, err, want)
		}
	}
	deadHosts("map[a.example:1 b.example:1]")

	if n, err := s.ReplayDead(DeadFilter{IDs: []Ref{{Seq: origin}}}); n != 1 || err != nil {
		t.Fatalf("replay by the 202's id: %d, %v", n, err)
	}
	deadHosts("map[b.example:1]")
	later := newMsg("a.example", 3)
	if err := s.Append(ctx, later, 0); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = openTest(t, dir, Options{})
	defer s.Close()
	ms, err := s.Read("a.example", 0, 10)
	if err != nil || len(ms) != 2 {
		t.Fatalf("read %d, %v; want the replayed message and the later one", len(ms), err)
	}
	again := ms[0]
	if again.ID <= b.ID || again.ID >= later.ID || again.OriginID() != origin || ms[1].OriginID() != later.ID {
		t.Fatalf("replayed: id %d origin %d (was %d; b %d, later %d)", again.ID, again.OriginID(), origin, b.ID, later.ID)
	}
	s.Bury(again, "permanent status 410", now)
	flush(t, s)
	dead, _, err := s.ListDead(DeadFilter{IDs: []Ref{{Seq: origin}}}, 0)
	if err != nil || len(dead) != 1 || dead[0].Message.OriginID() != origin {
		t.Fatalf("listing by the 202's id after a second death: %v, %v", dead, err)
	}
	deadHosts("map[a.example:1 b.example:1]")
	if n, err := s.PurgeDead(DeadFilter{IDs: []Ref{{Seq: origin}}}); n != 1 || err != nil {
		t.Fatalf("purge by the 202's id: %d, %v", n, err)
	}
	flush(t, s)
	deadHosts("map[b.example:1]")
	if u := s.Usage(); u.Dead != 1 {
		t.Fatalf("%d dead letters, want 1", u.Dead)
	}
}

package spool

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestDeadLetters(t *testing.T) {
	dir := t.TempDir()
	var appended []*Message
	var mu sync.Mutex
	listen := func(ms []*Message) {
		mu.Lock()
		appended = append(appended, ms...)
		mu.Unlock()
	}
	s := openTest(t, dir, Options{})
	s.Notify(listen)
	ctx := context.Background()
	for i := range 4 {
		h := "a.example"
		if i == 3 {
			h = "b.example"
		}
		if err := s.Append(ctx, newMsg(h, i), 0); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Unix(1700000100, 0)
	for _, h := range []string{"a.example", "b.example"} {
		ms, _ := s.Read(h, 0, 10)
		for _, m := range ms {
			m.Attempts, m.LastStatus, m.LastError = 1, 410, "410 Gone"
			s.Bury(m, "permanent status 410", now)
		}
	}
	waitUsage(t, s, 0)
	s.Close()

	s = openTest(t, dir, Options{})
	s.Notify(listen)
	defer s.Close()
	dead, total, err := s.ListDead(DeadFilter{}, 0)
	if err != nil || total != 4 || len(dead) != 4 {
		t.Fatalf("ListDead: %d/%d, %v; want 4", len(dead), total, err)
	}
	d := dead[0]
	if d.Reason != "permanent status 410" || d.Message.LastStatus != 410 || d.Message.Attempts != 1 || !d.DiedAt.Equal(now) {
		t.Fatalf("dead letter lost its details: %+v %+v", d, d.Message)
	}
	if u := s.Usage(); u.Dead != 4 || u.Messages != 0 {
		t.Fatalf("usage after restart: %+v", u)
	}
	mu.Lock()
	appended = nil
	mu.Unlock()
	n, err := s.ReplayDead(DeadFilter{Host: "b.example"})
	if err != nil || n != 1 {
		t.Fatalf("replay b: %d, %v", n, err)
	}
	n, err = s.ReplayDead(DeadFilter{IDs: []Ref{dead[0].Message.Ref()}})
	if err != nil || n != 1 {
		t.Fatalf("replay by id: %d, %v", n, err)
	}
	if u := s.Usage(); u.Dead != 2 || u.Messages != 2 {
		t.Fatalf("usage after replay: %+v", u)
	}
	// A round answers before it announces; once a later round has
	// answered, the replays' announcements are over.
	flush(t, s)
	mu.Lock()
	got := appended
	mu.Unlock()
	if len(got) != 2 || got[0].Attempts != 0 {
		t.Fatalf("replayed messages not announced to the dispatcher: %+v", got)
	}
	if ms, _ := s.Read("a.example", 0, 10); len(ms) != 1 || ms[0].Header.Get("X-Seq") != "0" {
		t.Fatalf("replayed message not queued: %+v", ms)
	}
	n, err = s.PurgeDead(DeadFilter{})
	if err != nil || n != 2 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	if _, total, _ := s.ListDead(DeadFilter{}, 0); total != 0 {
		t.Fatalf("%d dead letters left after purge", total)
	}
}

// TestPausedHostsSurviveRestart: pauses are stored, and a resume removes
// the record.
func TestPausedHostsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{})
	for _, h := range []string{"b.example", "a.example:8443", "c.example"} {
		if err := s.SetPaused(h, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetPaused("c.example", false); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPaused("never-paused.example", false); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, dir, Options{})
	defer s.Close()
	got, err := s.Paused()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.example:8443", "b.example"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("paused after restart: %q, want %q", got, want)
	}
	if _, n, _ := s.ListDead(DeadFilter{}, 0); n != 0 {
		t.Fatalf("pause records counted as %d dead letters", n)
	}
}

package spool

import (
	"context"
	"sync"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
)

func appendKeys(t *testing.T, s *Spool, body string, k Keys) (*Message, Appended) {
	t.Helper()
	m := newMsg("a.example", len(body))
	m.Body = []byte(body)
	got, err := s.AppendKeys(context.Background(), m, 0, k)
	if err != nil {
		t.Fatal(err)
	}
	return m, got
}

func readAll(t *testing.T, s *Spool) []*Message {
	t.Helper()
	ms, err := s.Read("a.example", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// A queued message is replaced in place; one that has just gone in flight
// is not, and the update is queued anew; the dispatcher's copy of a
// message replaced after it was read takes the new content when its
// attempt begins.
func TestCoalesceAgainstInFlight(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	k := Keys{Coalesce: "order-42"}
	first, how := appendKeys(t, s, "v1", k)
	if how != Stored {
		t.Fatalf("first: %v", how)
	}
	m2, how := appendKeys(t, s, "v2", k)
	if how != Coalesced || m2.ID != first.ID {
		t.Fatalf("second: %v id %d, want coalesced into %d", how, m2.ID, first.ID)
	}
	ms := readAll(t, s)
	if len(ms) != 1 || string(ms[0].Body) != "v2" || !ms[0].Enqueued.Equal(first.Enqueued) {
		t.Fatalf("queue after coalescing: %d messages, first body %q", len(ms), ms[0].Body)
	}
	if u := s.Usage(); u.Messages != 1 || u.Bytes != ms[0].size {
		t.Fatalf("usage %d messages, %d bytes; want 1, %d", u.Messages, u.Bytes, ms[0].size)
	}

	// The dispatcher read it, then it went in flight: a new one is queued.
	sending := ms[0]
	s.Begin(sending)
	m3, how := appendKeys(t, s, "v3", k)
	if how != Stored || m3.ID == first.ID {
		t.Fatalf("update while in flight: %v id %d", how, m3.ID)
	}
	if err := s.Delete(sending); err != nil {
		t.Fatal(err)
	}
	s.End(sending)
	if string(sending.Body) != "v2" {
		t.Fatalf("sent %q, want v2", sending.Body)
	}

	// The key now names the new one. The dispatcher reads it, it is
	// replaced, and its attempt begins with the last body.
	ms = readAll(t, s)
	if len(ms) != 1 || ms[0].ID != m3.ID {
		t.Fatalf("queue: %d messages", len(ms))
	}
	read := ms[0]
	if _, how := appendKeys(t, s, "v4-longer", k); how != Coalesced {
		t.Fatalf("update of a read but idle message: %v", how)
	}
	if grew := s.Begin(read); string(read.Body) != "v4-longer" || grew != int64(len("v4-longer")-len("v3")) {
		t.Fatalf("attempt begins with %q (grew %d), want v4-longer", read.Body, grew)
	}
	if err := s.Delete(read); err != nil {
		t.Fatal(err)
	}
	s.End(read)
	if u := s.Usage(); u.Messages != 0 || u.Bytes != 0 {
		t.Fatalf("usage after delivery: %d messages, %d bytes", u.Messages, u.Bytes)
	}
	if n := s.HostCoalesced("a.example"); n != 2 {
		t.Fatalf("coalesced %d, want 2", n)
	}
	// Delivered: the next update is queued.
	if _, how := appendKeys(t, s, "v5", k); how != Stored {
		t.Fatalf("update after delivery: %v", how)
	}
}

// An attempt that begins while a replacement of its message is being
// written gets the replacement: the update is never lost.
func TestCoalesceBeginWaitsForReplacement(t *testing.T) {
	var armed sync.Once
	block, inCommit := make(chan struct{}), make(chan struct{})
	var replacing bool
	var mu sync.Mutex
	s := openTest(t, t.TempDir(), Options{whileCommitting: func(*badger.DB) {
		mu.Lock()
		r := replacing
		mu.Unlock()
		if r {
			armed.Do(func() { close(inCommit); <-block })
		}
	}})
	defer s.Close()
	k := Keys{Coalesce: "c"}
	appendKeys(t, s, "old", k)
	read := readAll(t, s)[0]
	mu.Lock()
	replacing = true
	mu.Unlock()
	done := make(chan Appended)
	go func() { _, how := appendKeys(t, s, "new", k); done <- how }()
	<-inCommit // the replacement is staged, not yet durable
	begun := make(chan struct{})
	go func() { s.Begin(read); close(begun) }()
	close(block)
	<-begun
	if how := <-done; how != Coalesced {
		t.Fatalf("replacement: %v", how)
	}
	if string(read.Body) != "new" {
		t.Fatalf("attempt begins with %q, want new", read.Body)
	}
	s.End(read)
}

// An idempotency key and a coalesce key on one webhook: a repeat is a
// duplicate, a new key replaces.
func TestCoalesceWithIdempotencyKey(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	first, _ := appendKeys(t, s, "v1", Keys{Coalesce: "c", Idempotency: "e1", Window: 3600e9})
	if m, how := appendKeys(t, s, "v1", Keys{Coalesce: "c", Idempotency: "e1", Window: 3600e9}); how != Duplicate || m.ID != first.ID {
		t.Fatalf("repeat: %v", how)
	}
	if m, how := appendKeys(t, s, "v2", Keys{Coalesce: "c", Idempotency: "e2", Window: 3600e9}); how != Coalesced || m.ID != first.ID {
		t.Fatalf("update: %v", how)
	}
	if m, how := appendKeys(t, s, "v2", Keys{Coalesce: "c", Idempotency: "e2", Window: 3600e9}); how != Duplicate || m.ID != first.ID {
		t.Fatalf("repeat of the update: %v id %d", how, m.ID)
	}
	if ms := readAll(t, s); len(ms) != 1 || string(ms[0].Body) != "v2" {
		t.Fatalf("queue: %d messages", len(ms))
	}
}

// A message buried in the round that would replace it: the update is
// queued anew, and an attempt of the buried id would not wait.
func TestCoalesceTargetBuriedInTheSameRound(t *testing.T) {
	block, blocked := make(chan struct{}), make(chan struct{})
	var first sync.Once
	s := openTest(t, t.TempDir(), Options{whileCommitting: func(*badger.DB) {
		first.Do(func() { close(blocked); <-block })
	}})
	defer s.Close()
	go s.Append(context.Background(), newMsg("b.example", 0), 0) // the round the writer is busy with
	<-blocked
	k := Keys{Coalesce: "c"}
	done := make(chan *Message)
	var target *Message
	close(block)
	target, _ = appendKeys(t, s, "v1", k)
	// Hold the writer again while a burial and an update are pending.
	hold, held := make(chan struct{}), make(chan struct{})
	var again sync.Once
	s.opts.whileCommitting = func(*badger.DB) { again.Do(func() { close(held); <-hold }) }
	go s.Append(context.Background(), newMsg("b.example", 1), 0)
	<-held
	s.Bury(target, "gone", target.Enqueued)
	go func() { m, _ := appendKeys(t, s, "v2", k); done <- m }()
	s.mu.Lock()
	for len(s.pending) < 2 {
		s.cond.Wait()
	}
	s.mu.Unlock()
	close(hold)
	m := <-done
	if m.ID == target.ID {
		t.Fatalf("the update replaced a buried message")
	}
	if ms := readAll(t, s); len(ms) != 1 || string(ms[0].Body) != "v2" {
		t.Fatalf("queue: %d messages", len(ms))
	}
	s.Begin(target) // returns: nothing is being replaced
	s.End(target)
}

package journal

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/spool"
)

// deliverKept delivers m as the dispatcher does with journal.bodies on:
// the successful attempt, its request kept, the delete.
func deliverKept(t *testing.T, s *spool.Spool, m *spool.Message) {
	t.Helper()
	journalOf(s).RecordAttempt(m, spool.Attempt{At: time.Now(), Status: 200, Batch: 1})
	journalOf(s).JournalBody(m)
	if err := s.Delete(m); err != nil {
		t.Fatal(err)
	}
}

// A delivered webhook is sent again from its kept request, after a
// restart too: a new message with the same request, under the id the app
// got; its attempts read as before (the body's record is none of them).
func TestResend(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, testOpts{Journal: Options{Bodies: true}})
	m := newMsg("r.example", 1)
	m.URL = "http://r.example/hook?token=s3cret"
	if err := s.Append(context.Background(), m, 0); err != nil {
		t.Fatal(err)
	}
	deliverKept(t, s, m)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, testOpts{Journal: Options{Bodies: true}})
	defer s.Close()
	again, err := journalOf(s).Resend(context.Background(), m.Ref())
	if err != nil {
		t.Fatal(err)
	}
	if again.ID == m.ID || again.Ref() != m.Ref() || again.URL != m.URL || string(again.Body) != string(m.Body) ||
		again.Header.Get("X-Seq") != "1" || again.Method != "POST" {
		t.Fatalf("resent %+v (ref %s), want the request of %s under its id", again, again.Ref(), m.Ref())
	}
	got, err := s.Read("r.example", 0, 10)
	if err != nil || len(got) != 1 || got[0].ID != again.ID || got[0].Origin != m.ID {
		t.Fatalf("queue %v %v", got, err)
	}
	// One webhook: queued again, with the attempt of its first delivery.
	v, err := journalOf(s).Lookup(spool.Ref{Seq: m.ID})
	if err != nil || v.State != spool.StateQueued || v.Entry.ID != again.ID || len(v.Attempts) != 1 || strings.Contains(v.Entry.URL, "s3cret") {
		t.Fatalf("the resent webhook: %+v %v", v, err)
	}
}

// Without journal.bodies nothing is kept: resend says why. A webhook
// still queued is not resent. The sweep takes the kept request with its
// entry.
func TestResendRefusesAndSweep(t *testing.T) {
	now := time.Unix(1800000000, 0)
	s := openTest(t, t.TempDir(), testOpts{Now: func() time.Time { return now }, Journal: Options{Retain: time.Hour}})
	defer s.Close()
	off := newMsg("r.example", 1)
	if err := s.Append(context.Background(), off, 0); err != nil {
		t.Fatal(err)
	}
	deliverKept(t, s, off)
	if _, err := journalOf(s).Resend(context.Background(), off.Ref()); !errors.Is(err, ErrNoBody) {
		t.Fatalf("resend without journal.bodies: %v", err)
	}
	journalOf(s).opts.Bodies = true
	queued, kept := newMsg("r.example", 2), newMsg("r.example", 3)
	for _, m := range []*spool.Message{queued, kept} {
		m.Enqueued = now
		if err := s.Append(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := journalOf(s).Resend(context.Background(), queued.Ref()); err == nil || !strings.Contains(err.Error(), "is queued, not delivered") {
		t.Fatalf("resend of a queued webhook: %v", err)
	}
	deliverKept(t, s, kept)
	settleJournal(t, s)
	if n, err := journalOf(s).SweepJournal(now.Add(2 * time.Hour)); n != 2 || err != nil {
		t.Fatalf("swept %d %v, want the 2 delivered", n, err)
	}
	err := journalOf(s).kept.View(func(txn *badger.Txn) error {
		_, err := txn.Get(bodyKey(kept.ID))
		return err
	})
	if !errors.Is(err, badger.ErrKeyNotFound) {
		t.Fatalf("the kept request outlived its entry: %v", err)
	}
}

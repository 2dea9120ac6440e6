package journal

import (
	"context"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/spool"
)

// A dead letter replayed and then delivered is one webhook: its lookup by
// the id the app got reads delivered, with every attempt of both lives in
// order, and a list shows it once, in its current state.
func TestJournalReplayIsOneWebhook(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, testOpts{})
	m := newMsg("r.example", 1)
	if err := s.Append(context.Background(), m, 0); err != nil {
		t.Fatal(err)
	}
	first := m.ID
	t0 := time.Unix(1700000000, 0)
	journalOf(s).RecordAttempt(m, spool.Attempt{At: t0, Status: 500, Error: "http 500"})
	if _, err := s.BuryAll([]*spool.Message{m}, "attempts exhausted", t0); err != nil {
		t.Fatal(err)
	}
	if n, err := s.ReplayDead(spool.DeadFilter{Host: "r.example"}); n != 1 || err != nil {
		t.Fatalf("replay: %d, %v", n, err)
	}
	ms, err := s.Read("r.example", 0, 10)
	if err != nil || len(ms) != 1 || ms[0].OriginID() != first {
		t.Fatalf("queued after the replay: %v, %v", ms, err)
	}
	settleJournal(t, s)
	if v, err := journalOf(s).Lookup(spool.Ref{Seq: first}); err != nil || v.State != spool.StateQueued {
		t.Fatalf("after the replay: %+v, %v; want queued", v, err)
	}
	if page, _, _ := journalOf(s).List(Query{State: spool.OutcomeDead}); len(page) != 0 {
		t.Fatalf("dead after the replay: %d entries, want none", len(page))
	}
	r := ms[0]
	journalOf(s).RecordAttempt(r, spool.Attempt{At: t0.Add(time.Minute), Status: 200})
	if err := s.Delete(r); err != nil {
		t.Fatal(err)
	}
	check := func(s *spool.Spool) {
		t.Helper()
		v, err := journalOf(s).Lookup(spool.Ref{Seq: first})
		if err != nil {
			t.Fatal(err)
		}
		if v.State != spool.OutcomeDelivered || len(v.Attempts) != 2 || v.Attempts[0].Status != 500 || v.Attempts[1].Status != 200 {
			t.Fatalf("state %q, attempts %+v; want delivered after a 500 and a 200", v.State, v.Attempts)
		}
		if v.Entry.Origin != first {
			t.Fatalf("entry's id %d, want %d", v.Entry.Origin, first)
		}
		page, _, err := journalOf(s).List(Query{})
		if err != nil || len(page) != 1 || page[0].Outcome != spool.OutcomeDelivered || page[0].Origin != first {
			t.Fatalf("list: %+v, %v; want the one webhook, delivered", page, err)
		}
		if page, _, _ := journalOf(s).List(Query{Host: "r.example", State: spool.OutcomeDead}); len(page) != 0 {
			t.Fatalf("the host's dead: %d, want none", len(page))
		}
	}
	settleJournal(t, s)
	checkAcrossRestart(t, dir, s, check)
}

// A dead letter replayed costs the journal nothing at ingest: the new
// life is known from the queue while it is queued, after a restart too,
// and its link from the first entry is written when it leaves the queue,
// with its own entry.
func TestJournalLinksALaterLifeAtItsExit(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, testOpts{journalLinger: time.Hour})
	m := newMsg("r.example", 1)
	if err := s.Append(context.Background(), m, 0); err != nil {
		t.Fatal(err)
	}
	first := m.ID
	if _, err := s.BuryAll([]*spool.Message{m}, "attempts exhausted", time.Unix(1700000000, 0)); err != nil {
		t.Fatal(err)
	}
	handed := func(s *spool.Spool) uint64 {
		j := journalOf(s)
		j.mu.Lock()
		defer j.mu.Unlock()
		return j.seq
	}
	before := handed(s)
	if n, err := s.ReplayDead(spool.DeadFilter{Host: "r.example"}); n != 1 || err != nil {
		t.Fatalf("replay: %d, %v", n, err)
	}
	if n := handed(s) - before; n != 0 {
		t.Fatalf("the replay handed the journal %d records at ingest; want none", n)
	}
	ms, err := s.Read("r.example", 0, 10)
	if err != nil || len(ms) != 1 || ms[0].OriginID() != first {
		t.Fatalf("queued after the replay: %v, %v", ms, err)
	}
	again := ms[0].ID
	queued := func(s *spool.Spool) {
		t.Helper()
		if v, err := journalOf(s).Lookup(spool.Ref{Seq: first}); err != nil || v.State != spool.StateQueued || v.Entry.ID != again {
			t.Fatalf("lookup while queued again: %+v, %v; want %s queued", v, err, spool.IDString(again))
		}
		if page, _, _ := journalOf(s).List(Query{State: spool.OutcomeDead}); len(page) != 0 {
			t.Fatalf("dead while queued again: %d entries, want none", len(page))
		}
		if page, _, err := journalOf(s).List(Query{}); err != nil || len(page) != 1 || page[0].ID != again {
			t.Fatalf("list while queued again: %+v, %v; want the new life alone", page, err)
		}
	}
	queued(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, testOpts{})
	defer s.Close()
	queued(s)

	ms, err = s.Read("r.example", 0, 10)
	if err != nil || len(ms) != 1 {
		t.Fatalf("queued after the restart: %v, %v", ms, err)
	}
	if err := s.Delete(ms[0]); err != nil {
		t.Fatal(err)
	}
	journalOf(s).Sync()
	err = journalOf(s).kept.View(func(txn *badger.Txn) error {
		_, err := txn.Get(reliveKey(first, again))
		return err
	})
	if err != nil {
		t.Fatalf("the link to the later life, once it left the queue: %v", err)
	}
	if v, err := journalOf(s).Lookup(spool.Ref{Seq: first}); err != nil || v.State != spool.OutcomeDelivered || v.Entry.ID != again {
		t.Fatalf("lookup once delivered: %+v, %v", v, err)
	}
}

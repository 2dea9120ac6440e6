package journal

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/spool"
)

// List finds webhooks by idempotency key, and by text in their request as
// far as it is kept: headers (not secret values), and the body while
// queued, dead, or delivered with journal.bodies.
func TestJournalSearch(t *testing.T) {
	s := openTest(t, t.TempDir(), testOpts{Journal: Options{Bodies: true}})
	defer s.Close()
	var ms []*spool.Message
	for i := range 6 {
		m := newMsg("s.example", i)
		m.Header.Set("Idempotency-Key", fmt.Sprintf("evt-%d", i))
		m.Body = []byte(fmt.Sprintf(`{"order":"ord-%d"}`, 100+i))
		if i == 3 {
			m.Header.Set("Authorization", "Bearer tok-secret")
		}
		if err := s.Append(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	// 0 delivered with its body kept, 1 dead, the rest queued.
	deliverKept(t, s, ms[0])
	if _, err := s.BuryAll(ms[1:2], "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	settleJournal(t, s)
	ids := func(q Query) []uint64 {
		t.Helper()
		page, _, err := journalOf(s).List(q)
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, e := range page {
			out = append(out, e.ID)
		}
		return out
	}
	for _, c := range []struct {
		q    Query
		want []uint64
	}{
		{Query{Idempotency: "evt-3"}, []uint64{ms[3].ID}},
		{Query{Idempotency: "evt-3", Host: "s.example"}, []uint64{ms[3].ID}},
		{Query{Idempotency: "evt"}, nil},                 // a key is matched whole
		{Query{Contains: "ord-100"}, []uint64{ms[0].ID}}, // delivered, body kept
		{Query{Contains: "ord-101"}, []uint64{ms[1].ID}}, // dead
		{Query{Contains: "ord-104"}, []uint64{ms[4].ID}}, // queued
		{Query{Contains: "ord-104", Host: "s.example"}, []uint64{ms[4].ID}},
		{Query{Contains: "ord-104", State: spool.OutcomeDead}, nil},
		{Query{Contains: "X-Seq"}, []uint64{ms[5].ID, ms[4].ID, ms[3].ID, ms[2].ID, ms[1].ID, ms[0].ID}},
		{Query{Contains: "evt-5"}, []uint64{ms[5].ID}}, // its Idempotency-Key header
		{Query{Contains: "nowhere"}, nil},
		{Query{Contains: "tok-secret"}, nil}, // a secret header's value is not kept
		{Query{Contains: "Authorization"}, []uint64{ms[3].ID}},
	} {
		if got := ids(c.q); !slices.Equal(got, c.want) {
			t.Errorf("%+v: %v, want %v", c.q, got, c.want)
		}
	}
}

// A journal from before the indexes by time (with those by id: h and o)
// gets them built in the background: until then a listing reads the old
// ones; once built, the old keys are gone, and the sweep takes an entry's
// index keys with it.
func TestJournalIndexBuiltInBackground(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, testOpts{})
	var ms []*spool.Message
	for i := range 4 {
		m := newMsg("o.example", i)
		if err := s.Append(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	if _, err := s.BuryAll(ms[:2], "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	settleJournal(t, s)
	// As a journal written before the indexes: their keys and mark gone,
	// the old ones there.
	x := keysWith(t, s, prefixIndex)
	if len(x) != 2*3 { // the queued ones have none: the queue lists them
		t.Fatalf("%d index keys, want 6", len(x))
	}
	legacy := [][]byte{outcomeIndexKey(spool.OutcomeDead, ms[0].ID), outcomeIndexKey(spool.OutcomeDead, ms[1].ID)}
	for _, m := range ms[:2] {
		legacy = append(legacy, hostIndexKey(m.Host, m.ID))
	}
	if err := journalOf(s).deleteKept(append(x, keyIndexed)); err != nil {
		t.Fatal(err)
	}
	if err := journalOf(s).setKept(legacy); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, testOpts{Journal: Options{Retain: time.Nanosecond}})
	defer s.Close()
	if !journalOf(s).build.needed {
		t.Fatal("no build started")
	}
	<-journalOf(s).build.done
	if !journalOf(s).indexed.Load() {
		t.Fatal("not indexed after the build")
	}
	page, _, err := journalOf(s).List(Query{State: spool.OutcomeDead})
	if err != nil || len(page) != 2 || page[0].ID != ms[1].ID || page[1].ID != ms[0].ID {
		t.Fatalf("dead after the build: %v, %v", page, err)
	}
	if page, _, _ := journalOf(s).List(Query{Host: "o.example", State: spool.StateQueued}); len(page) != 2 || page[0].ID != ms[3].ID {
		t.Fatalf("queued after the build: %v", page)
	}
	if n := len(keysWith(t, s, prefixHostIndex)) + len(keysWith(t, s, prefixOutcomeIndex)); n != 0 {
		t.Fatalf("%d old index keys left", n)
	}
	if n, err := journalOf(s).SweepJournal(time.Now()); err != nil || n != 2 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	if n := len(keysWith(t, s, prefixIndex)); n != 0 {
		t.Fatalf("%d index keys left after the sweep, want none", n)
	}
	// A journal that is indexed opens indexed, with nothing to build.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, testOpts{})
	if journalOf(s).build.needed || !journalOf(s).indexed.Load() {
		t.Fatalf("reopened: build needed %v, indexed %v", journalOf(s).build.needed, journalOf(s).indexed.Load())
	}
}

// keysWith is the keys of s's kept database with prefix p.
func keysWith(t *testing.T, s *spool.Spool, p byte) [][]byte {
	t.Helper()
	var keys [][]byte
	err := journalOf(s).kept.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{p}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

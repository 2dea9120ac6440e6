package spool

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// List finds webhooks by idempotency key, and by text in their request as
// far as it is kept: headers (not secret values), and the body while
// queued, dead, or delivered with journal.bodies.
func TestJournalSearch(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{Journal: JournalOptions{Bodies: true}})
	defer s.Close()
	var ms []*Message
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
		page, _, err := s.List(q)
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
		{Query{Contains: "ord-104", State: OutcomeDead}, nil},
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

// A journal from before the outcome index gets it at Open: a listing by
// state finds its dead letters; the sweep takes an entry's index key
// with it.
func TestJournalOutcomeIndexBuiltAtOpen(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{})
	var ms []*Message
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
	// As a journal written before the index: no keys, no mark.
	var keys [][]byte
	s.kept.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixOutcomeIndex}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		return nil
	})
	if len(keys) != 2 {
		t.Fatalf("%d outcome index keys, want 2", len(keys))
	}
	if err := s.deleteKept(append(keys, keyOutcomeIndexed)); err != nil {
		t.Fatal(err)
	}
	if page, _, _ := s.List(Query{State: OutcomeDead}); len(page) != 0 {
		t.Fatalf("without the index: %d dead listed; the test would not tell", len(page))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, Options{Journal: JournalOptions{Retain: time.Nanosecond}})
	defer s.Close()
	page, _, err := s.List(Query{State: OutcomeDead})
	if err != nil || len(page) != 2 || page[0].ID != ms[1].ID || page[1].ID != ms[0].ID {
		t.Fatalf("dead after the index was built: %v, %v", page, err)
	}
	if n, err := s.SweepJournal(time.Now()); err != nil || n != 2 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	left := 0
	s.kept.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixOutcomeIndex}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			left++
		}
		return nil
	})
	if left != 0 {
		t.Fatalf("%d outcome index keys left after the sweep", left)
	}
}

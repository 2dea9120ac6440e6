package journal

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/internal/tartest"
	"github.com/hookpace/hookpace/spool"
)

// listAll pages through q's listing, two at a time, and returns the ids
// and states in the order listed.
func listAll(t *testing.T, s *spool.Spool, q Query) (ids []uint64, states []string) {
	t.Helper()
	q.Limit = 2
	for range 100 {
		page, next, err := journalOf(s).List(q)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			ids = append(ids, e.ID)
			states = append(states, stateOf(e))
		}
		if next.IsZero() {
			return ids, states
		}
		q.Before = next
	}
	t.Fatalf("listing %+v did not end", q)
	return nil, nil
}

// Queued webhooks (in the queue only) and finished ones (in the journal
// only) list together: newest first across pages, each once, by every
// filter.
func TestJournalListMixesQueuedAndFinished(t *testing.T) {
	s := openTest(t, t.TempDir(), testOpts{})
	defer s.Close()
	t0 := time.Unix(1700000000, 0)
	var ms []*spool.Message
	for i := range 12 {
		host := []string{"a.example", "b.example"}[i%2]
		m := newMsg(host, i)
		m.Enqueued = t0.Add(time.Duration(i) * time.Second)
		m.Header.Set("Idempotency-Key", fmt.Sprintf("k%d", i%4))
		if err := s.Append(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	// Finished, interleaved with the queued: 1, 4, 7, 10 delivered; 2 dead.
	for _, i := range []int{1, 4, 7, 10} {
		if err := s.Delete(ms[i]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.BuryAll(ms[2:3], "test", t0); err != nil {
		t.Fatal(err)
	}
	state := func(i int) string {
		switch i {
		case 1, 4, 7, 10:
			return spool.OutcomeDelivered
		case 2:
			return spool.OutcomeDead
		}
		return spool.StateQueued
	}
	want := func(keep func(i int) bool) (ids []uint64, states []string) {
		for i := len(ms) - 1; i >= 0; i-- {
			if keep(i) {
				ids, states = append(ids, ms[i].ID), append(states, state(i))
			}
		}
		return ids, states
	}
	for _, c := range []struct {
		name string
		q    Query
		keep func(i int) bool
	}{
		{"all", Query{}, func(int) bool { return true }},
		{"queued", Query{State: spool.StateQueued}, func(i int) bool { return state(i) == spool.StateQueued }},
		{"delivered", Query{State: spool.OutcomeDelivered}, func(i int) bool { return state(i) == spool.OutcomeDelivered }},
		{"host", Query{Host: "b.example"}, func(i int) bool { return i%2 == 1 }},
		{"host queued", Query{Host: "a.example", State: spool.StateQueued}, func(i int) bool { return i%2 == 0 && state(i) == spool.StateQueued }},
		{"idempotency", Query{Idempotency: "k1"}, func(i int) bool { return i%4 == 1 }},
		{"idempotency queued", Query{Idempotency: "k3", State: spool.StateQueued}, func(i int) bool { return i%4 == 3 && state(i) == spool.StateQueued }},
		{"since", Query{Since: t0.Add(5 * time.Second)}, func(i int) bool { return i >= 5 }},
		{"window", Query{Since: t0.Add(3 * time.Second), Until: t0.Add(9 * time.Second)}, func(i int) bool { return i >= 3 && i < 9 }},
		{"contains", Query{Contains: `"n":11`}, func(i int) bool { return i == 11 }},
	} {
		ids, states := listAll(t, s, c.q)
		wantIDs, wantStates := want(c.keep)
		if !slices.Equal(ids, wantIDs) || !slices.Equal(states, wantStates) {
			t.Errorf("%s: listed %v %v, want %v %v", c.name, ids, states, wantIDs, wantStates)
		}
	}
}

// A spool and journal written by the release that wrote an accepted
// record at ingest (testdata: on up.example, webhook 1 delivered after a
// failed attempt, 2 dead, 3 to 6 queued, 3 with a failed attempt; 7
// queued on other.example; each of up.example's with an Idempotency-Key)
// opens: every webhook is listed once, in its state, by every filter; a
// queued one, once delivered, is listed once, delivered, with its
// attempts.
func TestJournalUpgradeFromAcceptedRecords(t *testing.T) {
	dir := t.TempDir()
	tartest.Untar(t, "testdata/spool-accepted-records.tgz", dir)
	s := openTest(t, dir, testOpts{})
	defer s.Close()
	check := func(q Query, wantIDs []uint64, wantStates []string) {
		t.Helper()
		ids, states := listAll(t, s, q)
		if !slices.Equal(ids, wantIDs) || !slices.Equal(states, wantStates) {
			t.Fatalf("%+v: listed %v %v, want %v %v", q, ids, states, wantIDs, wantStates)
		}
	}
	q, d, x := spool.StateQueued, spool.OutcomeDead, spool.OutcomeDelivered
	check(Query{}, []uint64{7, 6, 5, 4, 3, 2, 1}, []string{q, q, q, q, q, d, x})
	check(Query{State: spool.StateQueued}, []uint64{7, 6, 5, 4, 3}, []string{q, q, q, q, q})
	check(Query{Host: "up.example"}, []uint64{6, 5, 4, 3, 2, 1}, []string{q, q, q, q, d, x})
	check(Query{Idempotency: "key-c"}, []uint64{3}, []string{q})
	v, err := journalOf(s).Lookup(spool.Ref{Seq: 3})
	if err != nil || v.State != spool.StateQueued || v.Position != 1 || len(v.Attempts) != 1 || v.Attempts[0].Status != 503 {
		t.Fatalf("queued: %+v %v", v, err)
	}
	if v, err := journalOf(s).Lookup(spool.Ref{Seq: 1}); err != nil || v.State != spool.OutcomeDelivered || len(v.Attempts) != 2 {
		t.Fatalf("delivered: %+v %v", v, err)
	}
	// Webhook 3 delivered now: its accepted record's queued key goes.
	m, err := s.Get("up.example", spool.Lane{}, 3)
	if err != nil {
		t.Fatal(err)
	}
	journalOf(s).RecordAttempt(m, spool.Attempt{At: time.Unix(1700000200, 0), Status: 204, Batch: 1})
	if err := s.Delete(m); err != nil {
		t.Fatal(err)
	}
	check(Query{}, []uint64{7, 6, 5, 4, 3, 2, 1}, []string{q, q, q, q, x, d, x})
	check(Query{State: spool.StateQueued}, []uint64{7, 6, 5, 4}, []string{q, q, q, q})
	check(Query{State: spool.OutcomeDelivered}, []uint64{3, 1}, []string{x, x})
	if v, err := journalOf(s).Lookup(spool.Ref{Seq: 3}); err != nil || v.State != spool.OutcomeDelivered || len(v.Attempts) != 2 ||
		v.Attempts[1].Status != 204 || v.Entry.Idempotency != "key-c" {
		t.Fatalf("delivered since: %+v %v", v, err)
	}
}

// A crash after a round's entries are durable, before its queue delete:
// the webhook is in both, is listed once (with its outcome), is delivered
// again, and its entry keeps both deliveries.
func TestJournalCrashBetweenEntryAndDelete(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, testOpts{})
	m := newMsg("c.example", 1)
	if err := s.Append(context.Background(), m, 0); err != nil {
		t.Fatal(err)
	}
	// The round's journal part, and no queue write: as a crash between.
	r := outcomeRec(m, spool.OutcomeDelivered, "", time.Unix(1700000100, 0))
	r.e.Final = &spool.Attempt{At: time.Unix(1700000100, 0), Status: 200, Batch: 1}
	if _, err := journalOf(s).writeJournal([]journalRec{r}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, testOpts{})
	defer s.Close()
	if ids, states := listAll(t, s, Query{}); !slices.Equal(ids, []uint64{m.ID}) || states[0] != spool.OutcomeDelivered {
		t.Fatalf("listed %v %v; want it once, delivered", ids, states)
	}
	again, err := s.Read("c.example", 0, 10)
	if err != nil || len(again) != 1 {
		t.Fatalf("%d queued, %v; want it still queued", len(again), err)
	}
	journalOf(s).RecordAttempt(again[0], spool.Attempt{At: time.Unix(1700000200, 0), Status: 202, Batch: 1})
	if err := s.Delete(again[0]); err != nil {
		t.Fatal(err)
	}
	v, err := journalOf(s).Lookup(spool.Ref{Seq: m.ID})
	if err != nil || v.State != spool.OutcomeDelivered || len(v.Attempts) != 2 || v.Attempts[0].Status != 200 || v.Attempts[1].Status != 202 {
		t.Fatalf("%+v %v; want both deliveries", v, err)
	}
	var n int
	journalOf(s).kept.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixJournal}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if len(it.Item().Key()) == 9 {
				n++
			}
		}
		return nil
	})
	if n != 1 {
		t.Fatalf("%d entries, want 1", n)
	}
}

// The index of queued webhooks keeps step with adds and removals, through
// its compactions: newest first, by host, by key, and by id.
func TestQueuedIndex(t *testing.T) {
	x := newQueuedIndex()
	const n = 5000
	host := func(id uint64) string { return fmt.Sprintf("h%d.example", id%3) }
	key := func(id uint64) string { return fmt.Sprintf("k%d", id%7) }
	for id := uint64(1); id <= n; id++ {
		x.add(id, host(id), spool.Lane{}, key(id))
	}
	x.add(n-1, "other.example", spool.Lane{}, "") // a replacement: indexed already
	queued := func(id uint64) bool { return id%4 == 0 || id > n-10 }
	for id := uint64(1); id <= n; id++ {
		if !queued(id) {
			x.remove(id, key(id))
		}
	}
	if len(x.ids) >= n/2 {
		t.Fatalf("%d ids kept of %d queued: no compaction", len(x.ids), n/4)
	}
	var want []uint64
	for id := uint64(n); id > 0 && len(want) < 20; id-- {
		if queued(id) && host(id) == "h1.example" && id < 4990 {
			want = append(want, id)
		}
	}
	var got []uint64
	for _, c := range x.before(4990, 0, "h1.example", "", 20) {
		got = append(got, c.id)
		if c.ref.host != host(c.id) {
			t.Fatalf("%d on %s", c.id, c.ref.host)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("host h1: %v, want %v", got, want)
	}
	got = got[:0]
	for _, c := range x.before(math.MaxUint64, 100, "", "k3", 1000) {
		got = append(got, c.id)
	}
	want = want[:0]
	for id := uint64(n); id > 100; id-- {
		if queued(id) && key(id) == "k3" {
			want = append(want, id)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("key k3: %v, want %v", got, want)
	}
	if _, ok := x.find(8); !ok {
		t.Fatal("8 is queued")
	}
	if _, ok := x.find(9); ok {
		t.Fatal("9 left")
	}
	for h, ids := range x.idem {
		for _, id := range ids {
			if !queued(id) {
				t.Fatalf("key hash %x keeps %d, which left", h, id)
			}
		}
	}
}

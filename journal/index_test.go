package journal

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// Paging through a listing from the indexes returns every entry once,
// newest accepted first, entries accepted at the same time by id; a
// cursor reads back as it is written, an id alone (a listing before the
// indexes) included.
func TestJournalIndexPaging(t *testing.T) {
	s := openTest(t, t.TempDir(), testOpts{})
	defer s.Close()
	at := time.Unix(1800000000, 0)
	var want []uint64
	for i := range 7 {
		m := newMsg("page.example", i)
		m.Enqueued = at.Add(time.Duration(i/3) * time.Second) // three at each time
		if err := s.Append(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
		want = append([]uint64{m.ID}, want...)
	}
	settleJournal(t, s)
	for _, q := range []Query{{}, {Host: "page.example"}, {State: spool.StateQueued}, {Host: "page.example", State: spool.StateQueued}} {
		var got []uint64
		q.Limit = 2
		for range 10 {
			page, next, err := journalOf(s).List(q)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range page {
				got = append(got, e.ID)
			}
			if next.IsZero() {
				break
			}
			if c, err := ParseCursor(next.String()); err != nil || c != next {
				t.Fatalf("cursor %v read back as %v, %v", next, c, err)
			}
			q.Before = next
		}
		if !slices.Equal(got, want) {
			t.Errorf("%+v: %v, want %v", q, got, want)
		}
	}
	// An id alone goes on from that id's entry.
	page, _, err := journalOf(s).List(Query{Before: Cursor{ID: want[2]}, Limit: 2})
	if err != nil || len(page) != 2 || page[0].ID != want[3] {
		t.Fatalf("from an id: %v, %v", page, err)
	}
	if c := cursorAt(pos{5, ^uint64(0)}); c != (Cursor{At: 6}) {
		t.Fatalf("cursor at the last id of a time: %+v", c)
	}
}

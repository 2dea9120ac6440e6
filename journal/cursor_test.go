package journal

import (
	"context"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// A page's cursor is there only while an entry after the page matches:
// a replayed webhook's first life, which a listing passes over, leaves
// none.
func TestListCursorOnlyWhenMoreMatch(t *testing.T) {
	s := openTest(t, t.TempDir(), testOpts{})
	defer s.Close()
	ctx := context.Background()
	a, b := newMsg("r.example", 1), newMsg("r.example", 2)
	for _, m := range []*spool.Message{a, b} {
		if err := s.Append(ctx, m, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.BuryAll([]*spool.Message{a}, "gone", time.Unix(1700000001, 0)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.ReplayDead(spool.DeadFilter{}); n != 1 || err != nil {
		t.Fatalf("replay: %d, %v", n, err)
	}
	settleJournal(t, s)
	for _, q := range []Query{{}, {Host: "r.example"}, {State: spool.StateQueued}} {
		var ids []uint64
		var pages int
		for {
			page, next, err := journalOf(s).List(Query{Host: q.Host, State: q.State, Limit: 1, Before: q.Before})
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, e := range page {
				ids = append(ids, e.ID)
			}
			if next.IsZero() {
				break
			}
			if len(page) == 0 || pages > 3 {
				t.Fatalf("query %+v: page %d is empty (or endless) yet has a cursor %v", q, pages, next)
			}
			q.Before = next
		}
		if len(ids) != 2 || pages != 2 {
			t.Errorf("query %+v: %d entries in %d pages, want the 2 webhooks in 2 pages of 1", q, len(ids), pages)
		}
	}
}

package spool

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkListDead: `msg list --state dead` over a journal of 200,000
// delivered webhooks and 20 dead letters, the dead ones the oldest. The
// journal is written directly, as its writer would.
func BenchmarkListDead(b *testing.B) {
	s := openTest(b, b.TempDir(), Options{MaxBytes: 1 << 34})
	defer s.Close()
	const n = 200_000
	at := time.Now()
	for i := 0; i < n; i += 10_000 {
		var recs []journalRec
		for j := range 10_000 {
			id := uint64(1_000_000 + i + j)
			outcome := OutcomeDelivered
			if i+j < 20 {
				outcome = OutcomeDead
			}
			e := &Entry{ID: id, Host: fmt.Sprintf("h%d.example", j%7), Method: "POST", URL: "http://h.example/hook",
				Size: 100, Accepted: at, Outcome: outcome, OutcomeAt: at}
			recs = append(recs, journalRec{e: e, entry: true})
		}
		if err := s.writeJournal(recs); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		page, _, err := s.List(Query{State: OutcomeDead})
		if err != nil || len(page) != 20 {
			b.Fatalf("%d dead, %v", len(page), err)
		}
	}
}

package spool

import (
	"errors"
	"testing"
)

// DropAhead removes every record it is given, however many more that is
// than one transaction of Badger's takes (about 6,500 entries).
func TestDropAheadOverTheTransactionLimit(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	const n = 8000
	ids := aheadRecords(t, s, n)
	s.DropAhead(ids)
	flush(t, s)
	if left := countAhead(t, s); left != 0 {
		t.Fatalf("%d of %d records ahead left after DropAhead", left, n)
	}
}

// An op that one transaction of Badger's cannot take fails whole: none
// of the writes it staged before the limit is committed.
func TestOpOverTheTransactionLimitWritesNothing(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	const n = 8000
	ids := aheadRecords(t, s, n)
	if err := s.submitWait(&dropAheadOp{ids: ids}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("dropping %d records ahead in one op: %v, want ErrTooLarge", n, err)
	}
	if left := countAhead(t, s); left != n {
		t.Fatalf("%d of %d records ahead left after the refused op, want all", left, n)
	}
}

// aheadRecords writes n records ahead and returns their ids.
func aheadRecords(t *testing.T, s *Spool, n int) []uint64 {
	t.Helper()
	ids := make([]uint64, n)
	for start := 0; start < n; start += 1000 {
		recs := make([]Ahead, min(1000, n-start))
		for i := range recs {
			ids[start+i] = uint64(start + i + 1)
			recs[i] = Ahead{ID: ids[start+i], Rec: []byte("outcome")}
		}
		if err := s.submitWait(&aheadOp{recs: recs}); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

func countAhead(t *testing.T, s *Spool) (n int) {
	t.Helper()
	if err := s.Ahead(func(uint64, []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

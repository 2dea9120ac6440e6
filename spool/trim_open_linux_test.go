package spool

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestOpenLeavesLittleResident: opening the spool reads its newest
// value-log file whole; what Open returns with is trimmed, whatever the
// periodic trim (off here) would do later.
func TestOpenLeavesLittleResident(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{trimLimit: math.MaxInt64})
	append20MiB(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, Options{trimLimit: math.MaxInt64})
	defer s.Close()
	// The newest value log and memtable log of each database keep
	// writeMargin behind their heads.
	got, most := residentUnder(t, dir), int64(4*writeMargin+(1<<20))
	t.Logf("%d KiB resident after Open", got>>10)
	if got > most {
		t.Fatalf("%d KiB of the spool's files resident after Open, want at most %d", got>>10, most>>10)
	}
}

// residentUnder is how many bytes of the files under dir mapped into
// this process are in its resident set (/proc/self/smaps: Rss).
func residentUnder(t *testing.T, dir string) int64 {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	in := false
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-"): // a mapping's header
			in = len(f) >= 6 && strings.HasPrefix(f[5], abs+string(filepath.Separator))
		case in && len(f) == 3 && f[0] == "Rss:":
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			n += kb << 10
		}
	}
	return n
}

// TestTrimWaitsForWhatItCanTake: a trim pass runs whenever the
// file-backed resident set is over the limit, as long as the last took
// something; after one that took little, not again while nothing more
// can be taken, however often it is asked (gcLoop asks every
// residentTrimEvery), until the set has grown trimStep or trimAgainAfter
// has passed; and at once when asked for all.
func TestTrimWaitsForWhatItCanTake(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{trimLimit: math.MaxInt64})
	defer s.Close()
	append20MiB(t, s)
	passes := func(limit int64) int64 {
		before := trimPasses.Load()
		trimResident(dir, limit)
		return trimPasses.Load() - before
	}
	now := time.Unix(1700000000, 0)
	trimNow = func() time.Time { return now }
	defer func() { trimNow = time.Now }()
	trimmedTo.Store(0)
	trimmedAt.Store(0)
	trimFutile.Store(false)
	if n := passes(1); n != 1 {
		t.Fatalf("%d passes over the limit with 20 MiB written, want 1", n)
	}
	// The first took the 20 MiB, so the next runs at the next tick, and
	// finds nothing to take.
	if n := passes(1); n != 1 || !trimFutile.Load() {
		t.Fatalf("%d passes right after one that took 20 MiB (futile: %v), want 1", n, trimFutile.Load())
	}
	for range 10 {
		if n := passes(1); n != 0 {
			t.Fatalf("a pass ran again with nothing more to take (%d KiB resident under the spool)", residentUnder(t, dir)>>10)
		}
	}
	// Reading the webhooks back maps their bodies in again.
	if ms, err := s.Read("a.example", 0, 200); err != nil || len(ms) != 160 {
		t.Fatalf("read %d, %v", len(ms), err)
	}
	if got := residentUnder(t, dir); got < trimStep {
		t.Fatalf("%d KiB resident after reading 20 MiB back: the test did not grow the set", got>>10)
	}
	if n := passes(1); n != 1 {
		t.Fatalf("%d passes once the set grew by the read, want 1", n)
	}
	if n := passes(0); n != 1 {
		t.Fatalf("%d passes asked for all, want 1", n)
	}
	// What a pass could not take, it tries again once trimAgainAfter has
	// passed.
	if n := passes(1); n != 0 {
		t.Fatalf("%d passes right after one, want 0", n)
	}
	now = now.Add(trimAgainAfter)
	if n := passes(1); n != 1 {
		t.Fatalf("%d passes once the last is trimAgainAfter old, want 1", n)
	}
}

// append20MiB queues 160 webhooks of 128 KiB to a.example: 20 MiB in
// the value log.
func append20MiB(t *testing.T, s *Spool) {
	t.Helper()
	body := make([]byte, 128<<10)
	for i := range 160 {
		m := newMsg("a.example", i)
		m.Body = body
		if err := s.Append(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
	}
}

package spool

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOpenLeavesLittleResident: opening the spool reads its newest
// value-log file whole; what Open returns with is trimmed, whatever the
// periodic trim (off here) would do later.
func TestOpenLeavesLittleResident(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{trimLimit: math.MaxInt64})
	body := make([]byte, 128<<10)
	for i := range 160 { // 20 MiB in the value log
		m := newMsg("a.example", i)
		m.Body = body
		if err := s.Append(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
	}
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

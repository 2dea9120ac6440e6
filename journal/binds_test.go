package journal

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The journal says which of max_bytes and retain binds at the rate it
// measured, and the sweep logs once when max_bytes removes entries younger
// than retain.
func TestJournalCapBinds(t *testing.T) {
	start := time.Unix(1800000000, 0)
	now := start
	var log bytes.Buffer
	s := openTest(t, t.TempDir(), testOpts{Now: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(&log, nil)),
		Journal: Options{Retain: 24 * time.Hour, MaxBytes: 1 << 30}})
	defer s.Close()
	const n = 300
	for i := range n { // one every 10 s: 0.1 a second, over 50 minutes
		m := newMsg("cap.example", i)
		m.Enqueued = start.Add(time.Duration(i) * 10 * time.Second)
		if err := s.Append(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(m); err != nil {
			t.Fatal(err)
		}
	}
	settleJournal(t, s)
	now = start.Add(n * 10 * time.Second)
	if u := journalOf(s).JournalUsage(); u.Binds != "" {
		t.Fatalf("measured before any sweep saw the oldest entry: %+v", u)
	}
	if n, err := journalOf(s).SweepJournal(now); err != nil || n != 0 {
		t.Fatalf("swept %d, %v", n, err)
	}
	u := journalOf(s).JournalUsage()
	if u.Binds != "retain" || u.Rate < 0.09 || u.Rate > 0.11 || u.BytesPerEntry <= 0 || u.Holds != 24*time.Hour {
		t.Fatalf("a 1 GiB cap at 0.1/s: %+v; want retain binding", u)
	}
	// A cap of 100 entries at 0.1/s holds about 1,000 s of a day.
	journalOf(s).opts.MaxBytes = 100 * u.BytesPerEntry
	u = journalOf(s).JournalUsage()
	if u.Binds != "max_bytes" || u.Holds < 900*time.Second || u.Holds > 1100*time.Second {
		t.Fatalf("a cap of 100 entries at 0.1/s: %+v", u)
	}
	for range 2 {
		if n, err := journalOf(s).SweepJournal(now); err != nil || n == 0 {
			t.Fatalf("swept %d, %v", n, err)
		}
		journalOf(s).opts.MaxBytes /= 2
	}
	if c := strings.Count(log.String(), "journal.max_bytes is removing entries younger than journal.retain"); c != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", c, log.String())
	}
}

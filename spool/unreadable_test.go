package spool

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnreadableRecordLeavesTheQueue: a queued record whose value is no
// longer in the value log (its end cut off, as a power cut leaves an
// unsynced round's) is removed from the queue, once, with an error in
// the log and its journal entry purged with the reason; every other
// record of its host, before and after it in the order of reads, is read
// whole, and reads return no error.
func TestUnreadableRecordLeavesTheQueue(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	var logs lockedBuffer
	opts := Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	opts.Dir = dir
	s, jr, err := OpenJournaled(opts)
	if err != nil {
		t.Fatal(err)
	}
	body := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 6000) } // in the value log
	put := func(host, fairness string, i int) *Message {
		m := newMsg(host, i)
		m.Fairness, m.Body = fairness, body(i)
		if err := s.Append(ctx, m, 0); err != nil {
			t.Fatal(err)
		}
		return m
	}
	var good []*Message
	for i := range 3 {
		good = append(good, put("a.example", "", i))
	}
	good = append(good, put("a.example", "k", 3)) // read after lane Lane{}
	good = append(good, put("b.example", "", 4))
	// The value log's last two records (about 6,100 bytes each).
	bad := []*Message{put("a.example", "", 5), put("c.example", "", 6)}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	vlogs, _ := filepath.Glob(filepath.Join(dir, "queue", "*.vlog"))
	if len(vlogs) == 0 {
		t.Fatal("no value-log file in the queue")
	}
	last := vlogs[len(vlogs)-1]
	fi, err := os.Stat(last)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(last, fi.Size()-7000); err != nil {
		t.Fatal(err)
	}

	if s, jr, err = OpenJournaled(opts); err != nil {
		t.Fatal(err)
	}
	if got := s.Usage().Messages; got != 7 {
		t.Fatalf("%d messages counted at open, want 7", got)
	}
	// What reads whole is never taken for lost; what was cut off is.
	for _, m := range good {
		if !s.readsWhole(m.key()) {
			t.Fatalf("record %d reads whole, but readsWhole says not", m.ID)
		}
	}
	for _, m := range bad {
		if s.readsWhole(m.key()) {
			t.Fatalf("record %d was cut off, but readsWhole says it reads whole", m.ID)
		}
	}
	if _, ok, err := s.Oldest("c.example"); ok || err != nil {
		t.Fatalf("Oldest of a host whose one record is unreadable: %v, %v; want none", ok, err)
	}
	check := func() {
		t.Helper()
		a, _, err := s.ReadHost("a.example", HostCursor{}, 100)
		if err != nil {
			t.Fatalf("reading a.example: %v", err)
		}
		b, err := s.Read("b.example", 0, 100)
		if err != nil {
			t.Fatalf("reading b.example: %v", err)
		}
		got := append(a, b...)
		if len(got) != len(good) {
			t.Fatalf("read %d messages, want %d", len(got), len(good))
		}
		for i, m := range got {
			if m.ID != good[i].ID || !bytes.Equal(m.Body, good[i].Body) {
				t.Fatalf("message %d: id %d (%d bytes), want %d", i, m.ID, len(m.Body), good[i].ID)
			}
		}
	}
	reported := s.badgerErrors.Load()
	check()
	if s.badgerErrors.Load() != reported {
		t.Fatal("reading the unreadable records counted as Badger errors: they would fail the round being committed")
	}
	for _, m := range bad {
		if _, err := s.Get(m.Host, Lane{}, m.ID); !errors.Is(err, ErrNotQueued) {
			t.Fatalf("Get of unreadable record %d: %v, want ErrNotQueued", m.ID, err)
		}
	}
	waitUsage(t, s, 5)
	check()
	if n := strings.Count(logs.String(), "a queued record cannot be read"); n != 2 {
		t.Fatalf("logged the 2 unreadable records %d times, want once each:\n%s", n, logs.String())
	}
	for _, m := range bad {
		state, err := jr.Lookup(m.Ref())
		if err != nil {
			t.Fatal(err)
		}
		reason, err := jr.Reason(m.Ref())
		if err != nil {
			t.Fatal(err)
		}
		if state != OutcomePurged || !strings.Contains(reason, "unreadable after a crash") {
			t.Fatalf("journal of %d: %s (%q), want purged, unreadable after a crash", m.ID, state, reason)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	if s, _, err = OpenJournaled(opts); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Usage().Messages; got != 5 {
		t.Fatalf("%d messages after the next open, want 5", got)
	}
	check()
}

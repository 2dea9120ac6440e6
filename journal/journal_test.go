package journal

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/tartest"
	"github.com/hookpace/hookpace/spool"
)

// An attempt with a partner's answer, then the delivery: the lookup gives
// both attempts, the answer's excerpt with its secrets redacted, and the
// outcome, after a restart too.
func TestJournalAttemptsAndOutcome(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, testOpts{Journal: Options{ResponseBody: 16}})
	m := newMsg("a.example", 1)
	m.URL = "http://a.example/hook?token=s3cret"
	if err := s.Append(context.Background(), m, 0); err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1700000000, 0)
	journalOf(s).RecordAttempt(m, spool.Attempt{At: t0, Duration: 3 * time.Millisecond, Status: 500, Error: "http 500",
		Header: http.Header{"Set-Cookie": {"sid=abc"}, "Content-Type": {"application/json"}},
		Body:   []byte(`{"error":"db pool exhausted"}`), Batch: 1})
	journalOf(s).RecordAttempt(m, spool.Attempt{At: t0.Add(time.Second), Status: 200, Batch: 1})
	if err := s.Delete(m); err != nil {
		t.Fatal(err)
	}
	check := func(s *spool.Spool) {
		t.Helper()
		v, err := journalOf(s).Lookup(spool.Ref{Seq: m.ID})
		if err != nil {
			t.Fatal(err)
		}
		if v.State != spool.OutcomeDelivered || len(v.Attempts) != 2 {
			t.Fatalf("state %q, %d attempts; want delivered, 2", v.State, len(v.Attempts))
		}
		a := v.Attempts[0]
		if a.Status != 500 || string(a.Body) != `{"error":"db poo` || a.Header.Get("Set-Cookie") != spool.Redacted ||
			a.Header.Get("Content-Type") != "application/json" || a.Duration != 3*time.Millisecond {
			t.Fatalf("first attempt %+v", a)
		}
		if v.Attempts[1].Status != 200 {
			t.Fatalf("second attempt %+v", v.Attempts[1])
		}
		if strings.Contains(v.Entry.URL, "s3cret") {
			t.Fatalf("URL kept its secret: %s", v.Entry.URL)
		}
	}
	checkAcrossRestart(t, dir, s, check)
}

// A queued webhook is found with its position; a buried one is dead with
// its reason; the list is newest first and pages.
func TestJournalStatesAndList(t *testing.T) {
	s := openTest(t, t.TempDir(), testOpts{})
	defer s.Close()
	var ms []*spool.Message
	for i := range 5 {
		m := newMsg("b.example", i)
		if err := s.Append(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	if _, err := s.BuryAll(ms[:1], "max_age 2s exceeded", time.Now()); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Drop(ms[1:2], "test"); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	settleJournal(t, s)
	v, err := journalOf(s).Lookup(spool.Ref{Seq: ms[3].ID})
	if err != nil || v.State != spool.StateQueued || v.Position != 2 {
		t.Fatalf("%+v %v; want queued at 2", v, err)
	}
	if v, _ := journalOf(s).Lookup(spool.Ref{Seq: ms[0].ID}); v.State != spool.OutcomeDead || !strings.HasPrefix(v.Entry.Reason, "max_age") {
		t.Fatalf("%+v", v)
	}
	if v, _ := journalOf(s).Lookup(spool.Ref{Seq: ms[1].ID}); v.State != spool.OutcomePurged || v.Entry.Reason != "test" {
		t.Fatalf("%+v", v)
	}
	if _, err := journalOf(s).Lookup(spool.Ref{Seq: 999}); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	page, next, err := journalOf(s).List(Query{Limit: 2})
	if err != nil || len(page) != 2 || page[0].ID != ms[4].ID || next.ID != ms[3].ID {
		t.Fatalf("%v %d %v", page, next, err)
	}
	page, next, _ = journalOf(s).List(Query{Limit: 2, Before: next})
	if len(page) != 2 || page[0].ID != ms[2].ID {
		t.Fatalf("second page %v %d", page, next)
	}
	if page, _, _ := journalOf(s).List(Query{State: spool.StateQueued}); len(page) != 3 {
		t.Fatalf("queued: %d", len(page))
	}
	// A host's entries come from its index, newest first, a page at a time.
	other := newMsg("b.example:8443", 9)
	if err := s.Append(context.Background(), other, 0); err != nil {
		t.Fatal(err)
	}
	page, next, _ = journalOf(s).List(Query{Host: "b.example", Limit: 3})
	if len(page) != 3 || page[0].ID != ms[4].ID || page[2].ID != ms[2].ID || next.ID != ms[1].ID+1 {
		t.Fatalf("host page: %v, next %d", page, next)
	}
	if page, next, _ = journalOf(s).List(Query{Host: "b.example", Limit: 3, Before: next}); len(page) != 2 || !next.IsZero() {
		t.Fatalf("host's second page: %v, next %d", page, next)
	}
	if page, _, _ = journalOf(s).List(Query{Host: "b.example:8443"}); len(page) != 1 || page[0].ID != other.ID {
		t.Fatalf("the other port: %v", page)
	}
	if u := journalOf(s).JournalUsage(); u.Entries != 2 || u.Bytes <= 0 { // the queued ones are the queue's
		t.Fatalf("%+v", u)
	}
}

// settleJournal waits until the journal has written what it was given.
func settleJournal(t *testing.T, s *spool.Spool) {
	t.Helper()
	journalOf(s).Sync()
}

// Retention by age and by bytes, oldest first, on an injected clock; a
// webhook still queued stays whatever its age.
func TestJournalRetention(t *testing.T) {
	now := time.Unix(1800000000, 0)
	s := openTest(t, t.TempDir(), testOpts{Now: func() time.Time { return now }, Journal: Options{Retain: time.Hour, MaxBytes: 1 << 20}})
	defer s.Close()
	var ms []*spool.Message
	for i := range 10 {
		m := newMsg("c.example", i)
		m.Enqueued = now.Add(time.Duration(i) * time.Minute)
		if err := s.Append(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
		journalOf(s).RecordAttempt(m, spool.Attempt{At: m.Enqueued, Status: 503, Error: "status 503"})
	}
	for _, m := range ms[1:] {
		if err := s.Delete(m); err != nil {
			t.Fatal(err)
		}
	}
	settleJournal(t, s)
	if n, _ := journalOf(s).SweepJournal(now.Add(time.Hour)); n != 0 {
		t.Fatalf("swept %d within retention", n)
	}
	now = now.Add(time.Hour + 4*time.Minute + time.Second) // ms[0..4] are older than an hour
	if n, _ := journalOf(s).SweepJournal(now); n != 4 {    // ms[0] is still queued
		t.Fatalf("swept %d by age, want 4", n)
	}
	if _, err := journalOf(s).Lookup(spool.Ref{Seq: ms[2].ID}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("swept entry found: %v", err)
	}
	if v, err := journalOf(s).Lookup(spool.Ref{Seq: ms[0].ID}); err != nil || v.State != spool.StateQueued || len(v.Attempts) != 1 {
		t.Fatalf("queued entry: %+v %v", v, err)
	}
	// Bytes: a budget of about one and a half entries keeps the newest
	// (the queued one is the queue's).
	before := journalOf(s).JournalUsage()
	journalOf(s).opts.MaxBytes = 3 * before.Bytes / (2 * before.Entries)
	if n, _ := journalOf(s).SweepJournal(now); n != 4 {
		t.Fatalf("swept %d by bytes", n)
	}
	if _, err := journalOf(s).Lookup(spool.Ref{Seq: ms[9].ID}); err != nil {
		t.Fatalf("newest entry swept: %v", err)
	}
	if after := journalOf(s).JournalUsage(); after.Bytes >= before.Bytes || after.Entries >= before.Entries {
		t.Fatalf("usage %+v -> %+v", before, after)
	}
}

// A webhook accepted costs the journal nothing: its view, queued, with
// its headers and body's size, comes from the queue, with its attempts so
// far; after a restart too.
func TestJournalWritesNothingAtIngest(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, testOpts{journalLinger: time.Hour})
	m := newMsg("d.example", 1)
	if err := s.Append(context.Background(), m, 0); err != nil {
		t.Fatal(err)
	}
	journalOf(s).mu.Lock()
	handed := journalOf(s).seq
	journalOf(s).mu.Unlock()
	if handed != 0 {
		t.Fatalf("the journal was handed %d records at ingest; want none", handed)
	}
	journalOf(s).RecordAttempt(m, spool.Attempt{At: time.Unix(1700000001, 0), Status: 503, Error: "http 503", Batch: 1})
	check := func(s *spool.Spool) {
		t.Helper()
		v, err := journalOf(s).Lookup(spool.Ref{Seq: m.ID})
		if err != nil || v.State != spool.StateQueued || v.Position != 1 || v.Entry.Host != "d.example" ||
			v.Entry.Header.Get("Content-Type") != "application/json" || v.Entry.Size != len(m.Body) || len(v.Attempts) != 1 || v.Attempts[0].Status != 503 {
			t.Fatalf("%+v %v; want queued at 1, with its header, size and attempt", v, err)
		}
		if page, _, err := journalOf(s).List(Query{}); err != nil || len(page) != 1 || page[0].ID != m.ID || page[0].Outcome != "" {
			t.Fatalf("list: %v %v", page, err)
		}
	}
	s = checkAcrossRestart(t, dir, s, check)
	if u := journalOf(s).JournalUsage(); u.Entries != 0 {
		t.Fatalf("%d entries in the journal for a queued webhook", u.Entries)
	}
}

// A webhook leaves the queue only with its outcome: when Delete returns,
// however long the journal lingers for company, the outcome is durable,
// ahead in the queue if the journal has not written it yet, a round's in
// a few records. A crash image taken then (the spool's files as they are,
// as kill -9 leaves them) opens with every webhook delivered, and nothing
// ahead once the journal has them.
func TestJournalOutcomeDurableWithDelete(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, testOpts{journalLinger: time.Hour})
	var ms []*spool.Message
	for i := range 100 {
		m := newMsg("a.example", i)
		if err := s.Append(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	if err := s.DeleteAll(ms); err != nil {
		t.Fatal(err)
	}
	ids, records := aheadIn(t, s)
	if len(ids) != len(ms) || ids[0] != ms[0].ID || ids[99] != ms[99].ID {
		t.Fatalf("outcomes ahead in the queue, of webhooks %v; want the 100 delivered", ids)
	}
	if records > 20 {
		t.Fatalf("%d records ahead for one round of 100: want them gathered", records)
	}
	image := t.TempDir()
	if err := os.CopyFS(image, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	// A clean close drops them: the journal has them.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	plain, err := spool.Open(spool.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if ids, _ := aheadIn(t, plain); len(ids) != 0 {
		t.Errorf("outcomes still ahead after a clean close: %v", ids)
	}
	if err := plain.Close(); err != nil {
		t.Fatal(err)
	}
	crashed := openTest(t, image, testOpts{})
	for _, m := range ms {
		v, err := journalOf(crashed).Lookup(spool.Ref{Seq: m.ID})
		if err != nil || v.State != spool.OutcomeDelivered || v.Entry.Host != "a.example" {
			t.Fatalf("%d after the crash: %+v, %v; want delivered", m.ID, v, err)
		}
	}
	if err := crashed.Close(); err != nil {
		t.Fatal(err)
	}
	crashed = openTest(t, image, testOpts{})
	defer crashed.Close()
	if ids, _ := aheadIn(t, crashed); len(ids) != 0 {
		t.Fatalf("outcomes still ahead once the journal wrote them: %v", ids)
	}
	if u := journalOf(crashed).JournalUsage(); u.Entries != int64(len(ms)) {
		t.Fatalf("%d entries, want %d", u.Entries, len(ms))
	}
}

// aheadIn is the ids of the webhooks whose outcomes are ahead in s's
// queue, and the number of records holding them.
func aheadIn(t *testing.T, s *spool.Spool) (ids []uint64, records int) {
	t.Helper()
	err := s.Ahead(func(id uint64, v []byte) error {
		records++
		recs, err := readAhead(id, v)
		for _, r := range recs {
			ids = append(ids, r.e.ID)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids, records
}

// A spool written by the release before the journal (testdata: four
// queued webhooks, one dead letter, a paused host) opens, keeps working,
// and journals what comes next.
func TestJournalOpensSpoolFromBefore(t *testing.T) {
	dir := t.TempDir()
	tartest.Untar(t, "testdata/spool-before-journal.tgz", dir)
	s := openTest(t, dir, testOpts{})
	defer s.Close()
	if u := s.Usage(); u.Messages != 4 || u.Dead != 1 {
		t.Fatalf("usage %+v", u)
	}
	if p, _ := s.Paused(); len(p) != 1 {
		t.Fatalf("paused %v", p)
	}
	old, err := s.Read("prev.example", 0, 10)
	if err != nil || len(old) != 4 {
		t.Fatal(len(old), err)
	}
	if v, err := journalOf(s).Lookup(spool.Ref{Seq: 5}); err != nil || v.State != spool.OutcomeDead {
		t.Fatalf("dead letter from before: %+v %v", v, err)
	}
	if err := s.Delete(old[0]); err != nil {
		t.Fatal(err)
	}
	m := newMsg("prev.example", 9)
	if err := s.Append(context.Background(), m, 0); err != nil || m.ID <= 5 {
		t.Fatal(m.ID, err)
	}
	settleJournal(t, s)
	if v, err := journalOf(s).Lookup(spool.Ref{Seq: m.ID}); err != nil || v.State != spool.StateQueued || v.Position != 4 {
		t.Fatalf("%+v %v", v, err)
	}
	if v, err := journalOf(s).Lookup(spool.Ref{Seq: old[0].ID}); err != nil || v.State != spool.OutcomeDelivered {
		t.Fatalf("%+v %v", v, err)
	}
}

// Dead letters are picked by when they died.
func TestDeadFilterWindow(t *testing.T) {
	s := openTest(t, t.TempDir(), testOpts{})
	defer s.Close()
	t0 := time.Unix(1800000000, 0)
	for i := range 4 {
		m := newMsg("w.example", i)
		if err := s.Append(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.BuryAll([]*spool.Message{m}, "test", t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	_, n, _ := s.ListDead(spool.DeadFilter{Since: t0.Add(time.Hour), Until: t0.Add(3 * time.Hour)}, 0)
	if n != 2 {
		t.Fatalf("%d dead letters in [1h, 3h), want 2", n)
	}
	if n, err := s.ReplayDead(spool.DeadFilter{Until: t0.Add(time.Hour)}); n != 1 || err != nil {
		t.Fatalf("replayed %d, %v; want 1", n, err)
	}
}

// Near spool.min_free the journal keeps nothing, and webhooks still come.
func TestJournalYieldsToMinFree(t *testing.T) {
	free := spool.MinFreeFloor() + 256<<10
	s := openTest(t, t.TempDir(), testOpts{MinFree: spool.MinFreeFloor(), DiskFree: func(string) (int64, error) { return free, nil }})
	defer s.Close()
	deliver := func(i int) {
		t.Helper()
		m := newMsg("full.example", i)
		if err := s.Append(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(m); err != nil {
			t.Fatal(err)
		}
	}
	deliver(1)
	journalOf(s).Sync()
	if u := journalOf(s).JournalUsage(); u.Entries != 0 {
		t.Fatalf("%d entries kept with %d bytes above min_free", u.Entries, free-spool.MinFreeFloor())
	}
	free += 64 << 20
	deliver(2)
	journalOf(s).Sync()
	if u := journalOf(s).JournalUsage(); u.Entries != 1 {
		t.Fatalf("%d entries once there is room", u.Entries)
	}
}

package journal

import (
	"flag"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/spool"
)

// BenchmarkListDead: `msg list --state dead` over a journal of 200,000
// delivered webhooks and 20 dead letters, the dead ones the oldest. The
// journal is written directly, as its writer would.
func BenchmarkListDead(b *testing.B) {
	s := openTest(b, b.TempDir(), testOpts{MaxBytes: 1 << 34})
	defer s.Close()
	const n = 200_000
	at := time.Now()
	for i := 0; i < n; i += 10_000 {
		var recs []journalRec
		for j := range 10_000 {
			id := uint64(1_000_000 + i + j)
			outcome := spool.OutcomeDelivered
			if i+j < 20 {
				outcome = spool.OutcomeDead
			}
			e := &Entry{ID: id, Host: fmt.Sprintf("h%d.example", j%7), Method: "POST", URL: "http://h.example/hook",
				Size: 100, Accepted: at, Outcome: outcome, OutcomeAt: at}
			recs = append(recs, journalRec{e: e})
		}
		if _, err := journalOf(s).writeJournal(recs); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		page, _, err := journalOf(s).List(Query{State: spool.OutcomeDead})
		if err != nil || len(page) != 20 {
			b.Fatalf("%d dead, %v", len(page), err)
		}
	}
}

var journalEntries = flag.Int("journal-entries", 100_000, "entries BenchmarkJournalQueries fills its journal with")

// journalMix is the journal BenchmarkJournalQueries reads: n webhooks over
// 14 days and hosts hosts, one accepted every 14d/n, the newest now. Of
// each 100, 90 were delivered at once (their final attempt in the entry),
// 5 died after three failed attempts, 5 are retrying (one failed attempt,
// queued: in the queue, not in the journal, as the spool keeps them). Every webhook has an Idempotency-Key "evt-<i>" and a URL
// with its own path "/hooks/<i>/order-<i>".
type journalMix struct {
	n, hosts int
	first    uint64 // the first id
	start    time.Time
	step     time.Duration
}

func (m journalMix) id(i int) uint64    { return m.first + uint64(i) }
func (m journalMix) at(i int) time.Time { return m.start.Add(time.Duration(i) * m.step) }
func (m journalMix) host(i int) string  { return fmt.Sprintf("p%d.example", i%m.hosts) }
func (m journalMix) outcome(i int) string {
	return [...]string{spool.OutcomeDead, "", spool.OutcomeDelivered}[min(i%100/5, 2)]
}

// fill writes the journal's entries and attempts, and the queued
// webhooks' records: the journal directly, as its writer would; the queue
// with s closed, as its writer would, and opens s again.
func (m journalMix) fill(b *testing.B, s *spool.Spool) *spool.Spool {
	const batch = 5_000
	var queued []*spool.Message
	for i := 0; i < m.n; i += batch {
		var recs []journalRec
		for j := i; j < min(i+batch, m.n); j++ {
			id, at := m.id(j), m.at(j)
			e := &Entry{ID: id, Host: m.host(j), Method: "POST", URL: fmt.Sprintf("https://%s/hooks/%d/order-%d", m.host(j), j, j),
				Idempotency: fmt.Sprintf("evt-%d", j), Size: 900, Accepted: at, Outcome: m.outcome(j),
				Header: http.Header{"Content-Type": {"application/json"}, "User-Agent": {"shop/2.1"}, "Idempotency-Key": {fmt.Sprintf("evt-%d", j)}}}
			if e.Outcome == "" {
				queued = append(queued, &spool.Message{ID: id, Host: e.Host, Method: e.Method, URL: e.URL, Header: e.Header,
					Body: make([]byte, e.Size), Enqueued: at, Attempts: 1, LastStatus: 503})
			}
			failed := 0
			switch e.Outcome {
			case spool.OutcomeDelivered:
				e.OutcomeAt = at.Add(40 * time.Millisecond)
				e.Final = &spool.Attempt{At: at.Add(30 * time.Millisecond), Duration: 9 * time.Millisecond, Status: 200, Body: []byte(`{"ok":true}`), Batch: 1}
			case spool.OutcomeDead:
				e.OutcomeAt, e.Reason, failed = at.Add(time.Minute), "3 attempts failed", 3
			default:
				failed = 1
			}
			if e.Outcome != "" {
				recs = append(recs, journalRec{e: e})
			}
			for k := range failed {
				a := spool.Attempt{At: at.Add(time.Duration(k+1) * time.Second), Duration: 30 * time.Millisecond, Status: 503,
					Error: "status 503", Body: []byte(`{"error":"busy"}`), Batch: 1}
				key, v := attemptKey(id, a.At), encodeAttempt(&a)
				recs = append(recs, journalRec{key: key, val: v, grow: int64(len(key) + len(v))})
			}
		}
		if _, err := journalOf(s).writeJournal(recs); err != nil {
			b.Fatal(err)
		}
	}
	opts := optsOf(s)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	db, err := badger.OpenManaged(spool.BadgerOptions(filepath.Join(opts.Dir, "queue"), nil).WithLogger(nil))
	if err != nil {
		b.Fatal(err)
	}
	ts := db.MaxVersion() + 1
	wb := db.NewManagedWriteBatch()
	for _, q := range queued {
		if err := wb.SetEntryAt(badger.NewEntry(spool.LaneKey(q.Host, spool.Lane{}, q.ID), q.Encode(nil)), ts); err != nil {
			b.Fatal(err)
		}
	}
	if err := wb.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	return openTest(b, opts.Dir, opts)
}

// BenchmarkJournalQueries times each kind of journal query over a journal
// of -journal-entries webhooks (journalMix; 100,000 by default):
//
//	go test ./spool -run '^$' -bench JournalQueries -benchtime 20x -journal-entries 1000000
//
// Each query asks for a page of 50, as msg list does, and checks what
// it found.
func BenchmarkJournalQueries(b *testing.B) {
	m := journalMix{n: *journalEntries, hosts: 5_000, first: 1 << 20, step: 14 * 24 * time.Hour / time.Duration(*journalEntries)}
	m.start = time.Now().Add(-time.Duration(m.n) * m.step)
	s := openTest(b, b.TempDir(), testOpts{MaxBytes: 1 << 40, Journal: Options{MaxBytes: 1 << 40, Retain: 60 * 24 * time.Hour}})
	t0 := time.Now()
	s = m.fill(b, s)
	defer s.Close()
	b.Logf("filled %d entries in %s; journal %d bytes", m.n, time.Since(t0).Round(time.Millisecond), journalOf(s).JournalUsage().Bytes)
	old := m.n / 10 // a webhook of the oldest tenth
	hour := time.Hour
	perHost := min(50, m.n/m.hosts)
	cases := []struct {
		name string
		q    Query
		min  int // entries the page must hold at least
		want func(*Entry) bool
		// pages: follow the cursor until min are found, as msg list
		// --limit 0 does, and time the whole search
		pages bool
	}{
		{"all", Query{}, 50, func(*Entry) bool { return true }, false},
		{"state=dead", Query{State: spool.OutcomeDead}, 50, func(e *Entry) bool { return e.Outcome == spool.OutcomeDead }, false},
		{"state=queued", Query{State: spool.StateQueued}, 50, func(e *Entry) bool { return e.Outcome == "" }, false},
		{"state=dead,since=1h", Query{State: spool.OutcomeDead, Since: time.Now().Add(-hour)}, 0, func(e *Entry) bool { return e.Outcome == spool.OutcomeDead }, false},
		{"state=dead,until=7d", Query{State: spool.OutcomeDead, Until: time.Now().Add(-7 * 24 * hour)}, 50, func(e *Entry) bool { return e.Outcome == spool.OutcomeDead }, false},
		{"host", Query{Host: m.host(old)}, perHost, func(e *Entry) bool { return e.Host == m.host(old) }, false},
		{"host,state=dead", Query{Host: m.host(old), State: spool.OutcomeDead}, 1, func(e *Entry) bool { return e.Host == m.host(old) && e.Outcome == spool.OutcomeDead }, false},
		{"host,until=7d", Query{Host: m.host(old), Until: time.Now().Add(-7 * 24 * hour)}, perHost / 3, func(e *Entry) bool { return e.Host == m.host(old) }, false},
		{"window=1h,7d_ago", Query{Since: time.Now().Add(-7*24*hour - hour), Until: time.Now().Add(-7 * 24 * hour)}, 50, func(*Entry) bool { return true }, false},
		{"idempotency_key", Query{Idempotency: fmt.Sprintf("evt-%d", old)}, 1, func(e *Entry) bool { return e.ID == m.id(old) }, false},
		{"contains", Query{Contains: fmt.Sprintf("/order-%d", old)}, 0, func(e *Entry) bool { return e.ID == m.id(old) }, false},
		{"contains,host", Query{Host: m.host(old), Contains: fmt.Sprintf("/order-%d", old)}, 1, func(e *Entry) bool { return e.ID == m.id(old) }, true},
	}
	b.Run("lookup", func(b *testing.B) {
		for range b.N {
			v, err := journalOf(s).Lookup(spool.Ref{Seq: m.id(old)})
			if err != nil || v.Entry.ID != m.id(old) {
				b.Fatalf("lookup: %v", err)
			}
		}
	})
	b.Run("lookup_queued", func(b *testing.B) {
		qi := old - old%100 + 5 // retrying: in the queue
		for range b.N {
			v, err := journalOf(s).Lookup(spool.Ref{Seq: m.id(qi)})
			if err != nil || v.Entry.ID != m.id(qi) || v.State != spool.StateQueued {
				b.Fatalf("lookup: %+v %v", v, err)
			}
		}
	})
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			c.q.Limit = 50
			for range b.N {
				var found []*Entry
				q := c.q
				for {
					page, next, err := journalOf(s).List(q)
					if err != nil {
						b.Fatal(err)
					}
					found = append(found, page...)
					if !c.pages || len(found) >= c.min || next.IsZero() {
						break
					}
					q.Before = next
				}
				if len(found) < c.min {
					b.Fatalf("%d entries", len(found))
				}
				for _, e := range found {
					if !c.want(e) {
						b.Fatalf("entry %d (%s, %q) should not be listed", e.ID, e.Host, e.Outcome)
					}
				}
			}
		})
	}
}

// BenchmarkJournalIndexBuild times the background build of the indexes
// for a journal of -journal-entries webhooks written before them (its
// index keys and mark taken away): from Open to the build's end.
func BenchmarkJournalIndexBuild(b *testing.B) {
	m := journalMix{n: *journalEntries, hosts: 5_000, first: 1 << 20, step: 14 * 24 * time.Hour / time.Duration(*journalEntries)}
	m.start = time.Now().Add(-time.Duration(m.n) * m.step)
	dir := b.TempDir()
	opts := testOpts{MaxBytes: 1 << 40, Journal: Options{MaxBytes: 1 << 40, Retain: 60 * 24 * time.Hour}}
	s := m.fill(b, openTest(b, dir, opts))
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		s := openTest(b, dir, opts)
		if err := journalOf(s).kept.DropPrefix([]byte{prefixIndex}, keyIndexed); err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		s = openTest(b, dir, opts)
		if !journalOf(s).build.needed {
			b.Fatal("no build")
		}
		<-journalOf(s).build.done
		b.StopTimer()
		if page, _, err := journalOf(s).List(Query{Idempotency: "evt-7"}); err != nil || len(page) != 1 || !journalOf(s).indexed.Load() {
			b.Fatalf("after the build: %v, %v", page, err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

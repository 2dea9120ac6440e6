package spool

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/internal/tartest"
)

// writeRaw writes ms as records under their keys with a plain Badger, as
// a spool (of this version or an earlier one) left them, before Open.
func writeRaw(t testing.TB, dir string, ms []*Message) {
	t.Helper()
	db, err := badger.Open(BadgerOptions(filepath.Join(dir, "queue"), slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	wb := db.NewWriteBatch()
	for _, m := range ms {
		if err := wb.Set(m.key(), m.encode(nil)); err != nil {
			t.Fatal(err)
		}
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// A spool from before lanes (testdata: plain records, a dead letter) takes
// laned webhooks beside its own; both survive a restart, and the counts
// per lane and key are rebuilt from the keys.
func TestUpgradeLanesBesidePlainRecords(t *testing.T) {
	dir := t.TempDir()
	tartest.Untar(t, "testdata/spool-before-journal.tgz", dir)
	h := "prev.example"
	s := openTest(t, dir, Options{})
	checkLanes(t, s, h, []LaneUsage{{Lane{}, 4}}, map[string]int{"": 4})
	a, b := lanedMsg(h, 20, "A", 0), lanedMsg(h, 21, "B", PriorityHigh)
	a.Enqueued = time.Unix(1, 0) // older than the plain ones: Oldest finds it in its lane
	appendAll(t, s, a, b)
	want := []LaneUsage{{Lane{}, 4}, {Lane{Key: "A"}, 1}, {Lane{Key: "B", Priority: PriorityHigh}, 1}}
	checkLanes(t, s, h, want, map[string]int{"": 4, "A": 1, "B": 1})
	usage := s.Usage()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTest(t, dir, Options{})
	defer s.Close()
	checkLanes(t, s, h, want, map[string]int{"": 4, "A": 1, "B": 1})
	// Bytes read back are Badger's estimates, a byte or so off (ledger.add).
	if u := s.Usage(); u.Messages != 6 || u.Bytes < usage.Bytes-6 || u.Bytes > usage.Bytes+6 || u.Dead != 1 {
		t.Fatalf("usage after reopen %+v, before %+v", u, usage)
	}
	all, err := s.Queued(h, 100)
	if err != nil || len(all) != 6 || all[4].ID != a.ID || all[5].ID != b.ID {
		t.Fatalf("queue list: %v, %v", ids(all), err)
	}
	if at, ok, err := s.Oldest(h); err != nil || !ok || !at.Equal(a.Enqueued) {
		t.Fatalf("oldest %v %v %v", at, ok, err)
	}
	if state, pos := s.WhereNow(h, b.ID); state != StateQueued || pos != 1 {
		t.Fatalf("laned webhook: %s at %d", state, pos)
	}
	// The old dead letter replays into Lane{}, as it was.
	if n, err := s.ReplayDead(DeadFilter{}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if err := s.DeleteAll(all); err != nil {
		t.Fatal(err)
	}
	checkLanes(t, s, h, []LaneUsage{{Lane{}, 1}}, map[string]int{"": 1})
	last, _ := s.Read(h, 0, 10)
	if err := s.DeleteAll(last); err != nil {
		t.Fatal(err)
	}
	if u := s.Usage(); u.Messages != 0 || u.Bytes != 0 || s.Lanes(h) != nil {
		t.Fatalf("emptied: %+v %v", u, s.Lanes(h))
	}
}

// ReadHost walks every lane of a host: Lane{} first, then the lanes in
// key order, in pages of any size, and stops at the host's end.
func TestReadHostPages(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	var want []uint64
	for i, l := range []Lane{{}, {Key: "A"}, {Key: "A", Priority: PriorityHigh}, {}, {Key: "B", Priority: PriorityLow}, {Key: "A"}} {
		m := lanedMsg("a.example", i, l.Key, l.Priority)
		appendAll(t, s, m, lanedMsg("b.example", i, l.Key, l.Priority))
		want = append(want, m.ID)
	}
	// Lane{}, then A high, A normal, B low.
	want = []uint64{want[0], want[3], want[2], want[1], want[5], want[4]}
	for page := 1; page <= 7; page++ {
		var got []uint64
		var c HostCursor
		for range 10 {
			ms, next, err := s.ReadHost("a.example", c, page)
			if err != nil {
				t.Fatal(err)
			}
			got, c = append(got, ids(ms)...), next
			if len(ms) < page {
				break
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("pages of %d: %v, want %v", page, got, want)
		}
	}
}

// The next webhook of one lane is found without reading another lane's
// backlog: 50,000 queued under key A leave reading key B's one webhook,
// and the end of A, at one key visited each.
func TestReadLaneSkipsOtherBacklogs(t *testing.T) {
	dir := t.TempDir()
	h := "a.example"
	ms := make([]*Message, 0, 50_001)
	for i := range 50_000 {
		m := lanedMsg(h, i, "A", 0)
		m.ID = uint64(i + 1)
		ms = append(ms, m)
	}
	lone := lanedMsg(h, 0, "B", 0)
	lone.ID = 25_000_000 // amid A's ids
	writeRaw(t, dir, append(ms, lone))
	s := openTest(t, dir, Options{})
	defer s.Close()
	if q, n := s.KeyQueued(h, "A"); q != 50_000 || n != 2 {
		t.Fatalf("KeyQueued(A) = %d, %d keys", q, n)
	}
	got, visited, err := s.readLane(h, Lane{Key: "B"}, 0, 10)
	if err != nil || len(got) != 1 || got[0].ID != lone.ID || visited != 1 {
		t.Fatalf("lane B: %v, %d keys visited, %v", ids(got), visited, err)
	}
	got, visited, err = s.readLane(h, Lane{Key: "A"}, 49_999, 10)
	if err != nil || len(got) != 1 || visited != 1 {
		t.Fatalf("end of lane A: %v, %d keys visited, %v", ids(got), visited, err)
	}
	if got, visited, _ := s.readLane(h, Lane{}, 0, 10); len(got) != 0 || visited != 0 {
		t.Fatalf("lane {}: %d read, %d visited", len(got), visited)
	}
}

// BenchmarkReadLane reads the next webhook of lane B, beside no backlog
// and beside 50,000 webhooks queued under key A: the two cost the same.
func BenchmarkReadLane(b *testing.B) {
	for _, backlog := range []int{0, 500, 5_000, 50_000} {
		b.Run(fmt.Sprintf("beside-%d", backlog), func(b *testing.B) {
			dir := b.TempDir()
			var ms []*Message
			for i := range backlog {
				m := lanedMsg("a.example", i, "A", 0)
				m.ID = uint64(i + 2)
				ms = append(ms, m)
			}
			lone := lanedMsg("a.example", 0, "B", 0)
			lone.ID = 1
			writeRaw(b, dir, append(ms, lone))
			s, err := Open(Options{Dir: dir})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.ResetTimer()
			for range b.N {
				if got, err := s.ReadLane("a.example", Lane{Key: "B"}, 0, 1); err != nil || len(got) != 1 {
					b.Fatal(len(got), err)
				}
			}
		})
	}
}

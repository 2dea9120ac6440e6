package spool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// TestSpoolWithRecordsInTheValueLogOpens: a spool written when every
// record went to the value log (a value threshold of 64 bytes, as before
// small records were inline) opens with today's options and delivers
// every message, bodies intact, small and large; and what is appended
// after goes on beside them.
func TestSpoolWithRecordsInTheValueLogOpens(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	body := func(i int) []byte {
		n := 100
		if i%5 == 0 {
			n = 3 * ValueThreshold // inline today too big: still in the value log
		}
		return bytes.Repeat([]byte{byte('a' + i%26)}, n)
	}
	old := openTest(t, dir, Options{tuneQueue: func(o badger.Options) badger.Options { return o.WithValueThreshold(64) }})
	const n = 200
	total := 0
	for i := range n {
		m := newMsg("a.example", i)
		m.Body = body(i)
		total += len(m.Body)
		if err := old.Append(ctx, m, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	if got := vlogBytes(t, filepath.Join(dir, "queue")); got < int64(total) {
		t.Fatalf("the old spool's value log holds %d bytes, less than the %d of its bodies: the test writes no old spool", got, total)
	}

	s := openTest(t, dir, Options{})
	defer s.Close()
	for i := n; i < n+10; i++ {
		m := newMsg("a.example", i)
		m.Body = body(i)
		if err := s.Append(ctx, m, 0); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Read("a.example", 0, 2*n)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n+10 {
		t.Fatalf("read %d messages, want %d", len(got), n+10)
	}
	for i, m := range got {
		if m.Header.Get("X-Seq") != fmt.Sprint(i) || !bytes.Equal(m.Body, body(i)) {
			t.Fatalf("message %d: X-Seq %q, body of %d bytes; want %d and its body of %d", i, m.Header.Get("X-Seq"), len(m.Body), i, len(body(i)))
		}
	}
	for _, m := range got {
		if err := s.Delete(m); err != nil {
			t.Fatal(err)
		}
	}
	if u := s.Usage(); u.Messages != 0 {
		t.Fatalf("%d messages left after deleting all", u.Messages)
	}
}

// vlogBytes sums the sizes of the value-log files in dir, up to what
// Badger wrote (a file it has closed is truncated to its end).
func vlogBytes(t *testing.T, dir string) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		sum += fi.Size()
	}
	return sum
}

// TestFreeSpaceIsReadOnceASecond: the writer reads free space anew once a
// reading is freeEvery old, or once it has counted freeSpendMax bytes
// against it, and every round close to min_free; in between, rounds count
// against the cached reading, and space taken from outside shows at the
// next reading.
func TestFreeSpaceIsReadOnceASecond(t *testing.T) {
	var free, reads atomic.Int64
	free.Store(1 << 30)
	var now atomic.Int64 // nanoseconds past start
	start := time.Unix(1700000000, 0)
	s := openTest(t, t.TempDir(), Options{
		MinFree: MinFreeFloor(),
		Now:     func() time.Time { return start.Add(time.Duration(now.Load())) },
		DiskFree: func(string) (int64, error) {
			reads.Add(1)
			return free.Load(), nil
		},
	})
	defer s.Close()
	ctx := context.Background()
	now.Add(int64(time.Hour)) // whatever Open read is old
	before := reads.Load()
	for i := range 50 {
		if err := s.Append(ctx, newMsg("a.example", i), 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := reads.Load() - before; got != 1 {
		t.Fatalf("50 appends within a second read free space %d times, want 1", got)
	}
	free.Store(1 << 10) // another process took the rest
	if err := s.Append(ctx, newMsg("a.example", 50), 0); err != nil {
		t.Fatalf("append within the second of the last reading: %v, want it counted against that reading", err)
	}
	now.Add(int64(freeEvery))
	if err := s.Append(ctx, newMsg("a.example", 51), 0); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("append a second later on a full disk: %v, want ErrDiskFull", err)
	}

	// The writer's own bytes bring the next reading: once it has counted
	// freeSpendMax against the last.
	free.Store(MinFreeFloor() + 2*freeNear)
	now.Add(int64(freeEvery))
	refused := -1
	for i := range 8 {
		m := newMsg("a.example", 100+i)
		m.Body = make([]byte, 1<<20)
		err := s.Append(ctx, m, 0)
		if errors.Is(err, ErrDiskFull) {
			refused = i
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			free.Store(MinFreeFloor() + 1<<10) // as if Badger wrote the rest
		}
	}
	if want := freeSpendMax >> 20; refused != want {
		t.Fatalf("refused the append of 1 MiB number %d (-1: none), want %d: the reading is renewed once %d bytes are counted against it", refused, want, freeSpendMax)
	}

	// Close to min_free, every round reads.
	free.Store(MinFreeFloor() + freeNear - 1)
	now.Add(int64(freeEvery))
	before = reads.Load()
	for i := range 3 {
		if err := s.Append(ctx, newMsg("a.example", 200+i), 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := reads.Load() - before; got < 3 {
		t.Fatalf("%d readings for 3 appends less than %d bytes above min_free, want one each", got, freeNear)
	}
}

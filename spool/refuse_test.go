package spool

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
)

// heldWriter opens a spool whose writer can be held in the middle of a
// commit, so that a test can gather ops into the next round.
type heldWriter struct {
	*Spool
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func openHeld(t *testing.T, opts Options) *heldWriter {
	h := &heldWriter{entered: make(chan struct{}), release: make(chan struct{})}
	var first sync.Once
	opts.whileCommitting = func(*badger.DB) {
		first.Do(func() {
			close(h.entered)
			<-h.release
		})
	}
	h.Spool = openTest(t, t.TempDir(), opts)
	t.Cleanup(func() { h.once.Do(func() { close(h.release) }); h.Close() })
	return h
}

// gather holds the writer in a first round, runs the appends, waits until
// they are all pending, and lets the writer take them in one round. It
// returns each append's error.
func (h *heldWriter) gather(t *testing.T, ms []*Message) []error {
	return h.gatherEach(len(ms), func(i int) error { return h.Append(context.Background(), ms[i], 0) })
}

// gatherEach is gather for n appends, the ith made by add(i).
func (h *heldWriter) gatherEach(n int, add func(i int) error) []error {
	go h.Append(context.Background(), newMsg("first.example", 0), 0)
	<-h.entered
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = add(i) })
	}
	for {
		h.mu.Lock()
		pending := len(h.pending)
		h.mu.Unlock()
		if pending == n {
			break
		}
		runtime.Gosched()
	}
	h.once.Do(func() { close(h.release) })
	wg.Wait()
	return errs
}

// TestRefusedWriteFailsAlone: a record that Badger refuses (here, over a
// 1 MiB value-log file) fails by itself with a fixed reason; the others
// of its round are committed, and neither the answers nor the log hold
// any of its bytes.
func TestRefusedWriteFailsAlone(t *testing.T) {
	var logs lockedBuffer // Badger logs from its own goroutines
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := openHeld(t, Options{Logger: log, tuneQueue: func(o badger.Options) badger.Options {
		return o.WithValueLogFileSize(1 << 20)
	}})
	const secret = "Bearer OTHER-APPS-SECRET"
	big := newMsg("big.example", 0)
	big.Header.Set("Authorization", secret)
	big.URL += "?token=" + secret
	big.Body = bytes.Repeat([]byte(secret), (2<<20)/len(secret))
	ms := []*Message{newMsg("a.example", 1), big, newMsg("a.example", 2), newMsg("b.example", 3)}
	errs := h.gather(t, ms)
	for i, err := range errs {
		if ms[i] == big {
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("the record over Badger's limit: %v, want ErrTooLarge", err)
			}
		} else if err != nil {
			t.Fatalf("append %d, sharing a round with a refused one: %v", i, err)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Fatalf("an error holds stored bytes: %q", err)
		}
	}
	if strings.Contains(logs.String(), "SECRET") {
		t.Fatalf("the log holds stored bytes:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "the store refused a write") {
		t.Fatalf("the refusal is not logged:\n%s", logs.String())
	}
	if u := h.Usage(); u.Messages != 4 {
		t.Fatalf("usage %d messages, want the 4 stored", u.Messages)
	}
	for _, host := range []string{"a.example", "b.example"} {
		if got, err := h.Read(host, 0, 10); err != nil || len(got) == 0 {
			t.Fatalf("read %s: %d, %v", host, len(got), err)
		}
	}
}

// lockedBuffer is a bytes.Buffer that many goroutines may write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRoundCountsAgainstHeadroom: the ops of one round are counted against
// the space above MinFree before anything is written; those that would
// cross it are refused, the rest written. The refusal shows in Usage
// until space returns.
func TestRoundCountsAgainstHeadroom(t *testing.T) {
	var mu sync.Mutex
	free := MinFreeFloor() + 100<<10
	h := openHeld(t, Options{MinFree: MinFreeFloor(), DiskFree: func(string) (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		return free, nil
	}})
	var ms []*Message
	for i := range 3 {
		m := newMsg("a.example", i)
		m.Body = make([]byte, 40<<10)
		ms = append(ms, m)
	}
	errs := h.gather(t, ms)
	ok, full := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, ErrDiskFull):
			full++
		default:
			t.Fatal(err)
		}
	}
	if ok != 2 || full != 1 {
		t.Fatalf("%d stored, %d refused for space; want 2 and 1 (100 KiB of headroom, 3 x 40 KiB)", ok, full)
	}
	mu.Lock()
	free = MinFreeFloor() + 10<<10 // what the two written took
	mu.Unlock()
	if u := h.Usage(); u.Accepting || u.Refusing != ErrDiskFull.Error() || u.Messages != 3 {
		t.Fatalf("usage: accepting %v, refusing %q, %d messages; want false, disk full, 3", u.Accepting, u.Refusing, u.Messages)
	}
	mu.Lock()
	free = 1 << 30
	mu.Unlock()
	if u := h.Usage(); !u.Accepting || u.Refusing != "" {
		t.Fatalf("usage once space returned: accepting %v, refusing %q", u.Accepting, u.Refusing)
	}
}

// TestTooLargeForTheSpool: a record over MaxRecordSize is refused before
// anything is written or counted.
func TestTooLargeForTheSpool(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	m := newMsg("a.example", 0)
	m.Body = make([]byte, MaxRecordSize)
	if m.RecordSize(len(m.Body)) <= MaxRecordSize {
		t.Fatalf("RecordSize %d with a body of MaxRecordSize", m.RecordSize(len(m.Body)))
	}
	if err := s.Append(context.Background(), m, 0); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("append over MaxRecordSize: %v, want ErrTooLarge", err)
	}
	m.Body = m.Body[:MaxRecordSize-m.RecordSize(0)-8]
	if n := m.RecordSize(len(m.Body)); n > MaxRecordSize {
		t.Fatalf("RecordSize %d", n)
	}
	if err := s.Append(context.Background(), m, 0); err != nil {
		t.Fatalf("append just under MaxRecordSize: %v", err)
	}
	if u := s.Usage(); u.Messages != 1 {
		t.Fatalf("usage %d messages, want 1", u.Messages)
	}
}

package spool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

func openTest(t testing.TB, dir string, opts Options) *Spool {
	t.Helper()
	opts.Dir = dir
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newMsg(host string, i int) *Message {
	return &Message{
		Host:     host,
		Method:   "POST",
		URL:      "http://" + host + "/hook",
		Header:   http.Header{"Content-Type": {"application/json"}, "X-Seq": {fmt.Sprint(i)}},
		Body:     []byte(fmt.Sprintf(`{"n":%d}`, i)),
		Enqueued: time.Unix(1700000000, int64(i)),
	}
}

func TestAppendReadFIFOPerHost(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	ctx := context.Background()
	for i := range 50 {
		for _, h := range []string{"a.example", "b.example:8443"} {
			if err := s.Append(ctx, newMsg(h, i), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, h := range []string{"a.example", "b.example:8443"} {
		var got []*Message
		var after uint64
		for {
			ms, err := s.Read(h, after, 7)
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) == 0 {
				break
			}
			got = append(got, ms...)
			after = ms[len(ms)-1].ID
		}
		if len(got) != 50 {
			t.Fatalf("%s: read %d messages, want 50", h, len(got))
		}
		for i, m := range got {
			if m.Header.Get("X-Seq") != fmt.Sprint(i) || m.Host != h || !bytes.Equal(m.Body, []byte(fmt.Sprintf(`{"n":%d}`, i))) {
				t.Fatalf("%s: message %d out of order or altered: %+v", h, i, m)
			}
			if i > 0 && m.ID <= got[i-1].ID {
				t.Fatalf("ids not increasing")
			}
		}
	}
	if u := s.Usage(); u.Messages != 100 {
		t.Fatalf("usage %d messages, want 100", u.Messages)
	}
}

func TestRestartKeepsMessagesAndCounts(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := openTest(t, dir, Options{})
	var ids []uint64
	for i := range 20 {
		m := newMsg("a.example", i)
		if err := s.Append(ctx, m, 0); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	first, _ := s.Read("a.example", 0, 5)
	for _, m := range first {
		if err := s.Delete(m); err != nil {
			t.Fatal(err)
		}
	}
	waitUsage(t, s, 15)
	before := s.Usage()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTest(t, dir, Options{})
	defer s.Close()
	after := s.Usage()
	// Byte sizes read back are Badger's estimates: within a byte a message.
	if after.Messages != 15 || after.Bytes < before.Bytes-15 || after.Bytes > before.Bytes+15 {
		t.Fatalf("after restart: %d messages / %d bytes, want 15 / %d", after.Messages, after.Bytes, before.Bytes)
	}
	ms, err := s.Read("a.example", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 15 || ms[0].ID != ids[5] {
		t.Fatalf("read %d messages starting at %d, want 15 starting at %d", len(ms), ms[0].ID, ids[5])
	}
	// New ids continue above the old ones.
	m := newMsg("a.example", 99)
	if err := s.Append(ctx, m, 0); err != nil {
		t.Fatal(err)
	}
	if m.ID <= ids[len(ids)-1] {
		t.Fatalf("new id %d reuses an old one (last %d)", m.ID, ids[len(ids)-1])
	}
}

// TestNotifyInIDOrder: once a listener is connected, every message made
// durable is announced to it, in id order; what was appended before is not
// (the listener reads it from the spool).
func TestNotifyInIDOrder(t *testing.T) {
	var mu sync.Mutex
	var seen []uint64
	s := openTest(t, t.TempDir(), Options{})
	before := newMsg("a.example", -1)
	if err := s.Append(context.Background(), before, 0); err != nil {
		t.Fatal(err)
	}
	// A round answers its appends before it announces them; the writer
	// finishes rounds in turn, so once a later round has answered,
	// before's announcement is over.
	flush(t, s)
	s.Notify(func(ms []*Message) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range ms {
			seen = append(seen, m.ID)
		}
	})
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			if err := s.Append(context.Background(), newMsg("a.example", i), 0); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	s.Close()
	if len(seen) != 200 {
		t.Fatalf("Notify's listener saw %d messages, want 200", len(seen))
	}
	if seen[0] <= before.ID {
		t.Fatalf("announced id %d, appended before Notify as %d", seen[0], before.ID)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Fatalf("announced out of id order at %d: %v", i, seen[i-1:i+1])
		}
	}
}

func TestBackpressureHysteresis(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{MaxMessages: 10, HighWater: 0.8, LowWater: 0.5})
	defer s.Close()
	ctx := context.Background()
	var accepted []*Message
	var full *FullError
	for i := range 12 {
		m := newMsg("a.example", i)
		err := s.Append(ctx, m, 0)
		switch {
		case err == nil:
			accepted = append(accepted, m)
		case errors.As(err, &full):
			if !full.NoEstimate {
				t.Fatalf("RetryAfter estimated at %v before anything drained", full.RetryAfter)
			}
		default:
			t.Fatal(err)
		}
	}
	if len(accepted) != 8 {
		t.Fatalf("accepted %d, want 8 (high water 0.8 of 10)", len(accepted))
	}
	// Draining to 6 (above low water) does not reopen the gate.
	if err := s.Delete(accepted[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(accepted[1]); err != nil {
		t.Fatal(err)
	}
	waitUsage(t, s, 6)
	if err := s.Append(ctx, newMsg("a.example", 50), 0); !errors.As(err, &full) {
		t.Fatalf("at 6/10 after high water: got %v, want FullError", err)
	}
	// The answer before a body is read carries the same estimate: one
	// message (6 → 5) at the rate of the two just delivered, well under the
	// 30 s given when nothing has drained for a while.
	if f := s.Full(); f == nil || f.NoEstimate || f.RetryAfter >= 30*time.Second {
		t.Fatalf("Full() at 6/10 after high water: %+v, want an estimate from the drain rate", f)
	}
	if err := s.Delete(accepted[2]); err != nil {
		t.Fatal(err)
	}
	waitUsage(t, s, 5)
	if !s.Accepting() || s.Full() != nil {
		t.Fatalf("not accepting at the low-water mark (Full: %+v)", s.Full())
	}
	if err := s.Append(ctx, newMsg("a.example", 51), 0); err != nil {
		t.Fatalf("at low water: %v", err)
	}
}

func TestHostLimit(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	ctx := context.Background()
	for i := range 3 {
		if err := s.Append(ctx, newMsg("flood.example", i), 3); err != nil {
			t.Fatal(err)
		}
	}
	var full *FullError
	if err := s.Append(ctx, newMsg("flood.example", 3), 3); !errors.As(err, &full) || full.Host != "flood.example" {
		t.Fatalf("over max_queued: got %v, want host FullError", err)
	}
	// How soon it has room depends on the host's pacing, which the caller
	// knows: the spool says how many must leave first.
	if full.Over != 1 || full.RetryAfter != 0 {
		t.Fatalf("over max_queued: Over %d, RetryAfter %v; want 1 and 0", full.Over, full.RetryAfter)
	}
	if err := s.Append(ctx, newMsg("other.example", 0), 3); err != nil {
		t.Fatalf("other host refused: %v", err)
	}
	// A lower limit (after a reload) leaves more to drain first.
	if err := s.Append(ctx, newMsg("flood.example", 4), 2); !errors.As(err, &full) || full.Over != 2 {
		t.Fatalf("over a lowered max_queued: %v, want Over 2", err)
	}
	// One delivery makes room for one.
	got, err := s.Read("flood.example", 0, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("read: %v", err)
	}
	if err := s.Delete(got[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, newMsg("flood.example", 5), 3); err != nil {
		t.Fatalf("after a delivery: %v", err)
	}
	if err := s.Append(ctx, newMsg("flood.example", 6), 3); !errors.As(err, &full) {
		t.Fatalf("over max_queued again: got %v, want host FullError", err)
	}
}

func TestEmptyQueueIsReclaimed(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{})
	ctx := context.Background()
	body := make([]byte, 64<<10)
	var ms []*Message
	for i := range 400 { // 25 MiB, past reclaimAfter
		m := newMsg("a.example", i)
		m.Body = body
		if err := s.Append(ctx, m, 0); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	dead := ms[0]
	s.Bury(dead, "permanent status 410", time.Now())
	for _, m := range ms[1:] {
		if err := s.Delete(m); err != nil {
			t.Fatal(err)
		}
	}
	waitUsage(t, s, 0)
	if lsm, vlog := s.queue.Size(); lsm+vlog > 4<<20 {
		t.Fatalf("queue database holds %d bytes after draining, want it dropped", lsm+vlog)
	}
	// The dead letter and the id sequence survive the drop and a restart.
	next := newMsg("a.example", 999)
	if err := s.Append(ctx, next, 0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, dir, Options{})
	defer s.Close()
	if _, n, _ := s.ListDead(DeadFilter{}, 0); n != 1 {
		t.Fatalf("%d dead letters after reclaim and restart, want 1", n)
	}
	again := newMsg("a.example", 1000)
	if err := s.Append(ctx, again, 0); err != nil || again.ID <= next.ID {
		t.Fatalf("id after restart %d, want above %d (%v)", again.ID, next.ID, err)
	}
	if got, _ := s.Read("a.example", 0, 10); len(got) != 2 || got[0].ID != next.ID {
		t.Fatalf("queue after reclaim: %d messages", len(got))
	}
}

// flushOp writes nothing: a test submits one and waits for it to learn
// that the writer has applied every op submitted before it.
type flushOp struct{ opBase }

func (o *flushOp) kind() string                            { return "flush" }
func (o *flushOp) shrinks() bool                           { return true }
func (o *flushOp) phases() phase                           { return 0 }
func (o *flushOp) weight() int                             { return 0 }
func (o *flushOp) stage(phase, *badger.Txn, *uint64) error { return nil }
func (o *flushOp) settle(*ledger, time.Time)               {}

// flush returns once the writer has applied every op submitted before it,
// including those nobody waits for (burials, delivery-state updates).
func flush(t *testing.T, s *Spool) {
	t.Helper()
	if err := s.submitWait(&flushOp{}); err != nil {
		t.Fatal(err)
	}
}

// waitUsage flushes the writer and checks how many messages are queued.
func waitUsage(t *testing.T, s *Spool, want int64) {
	t.Helper()
	flush(t, s)
	if got := s.Usage().Messages; got != want {
		t.Fatalf("usage %d messages, want %d", got, want)
	}
}

func TestDecodeRejectsCorruptRecords(t *testing.T) {
	m := newMsg("a.example", 1)
	b := m.encode(nil)
	for i := range len(b) - 1 {
		if _, err := decodeMessage("a.example", 1, b[:i]); err == nil {
			t.Fatalf("truncated record of %d bytes decoded without error", i)
		}
	}
	got, err := decodeMessage("a.example", 1, b)
	if err != nil || got.URL != m.URL || !bytes.Equal(got.Body, m.Body) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
}

// The queue database numbers its own transactions (Badger's managed mode):
// deletes after a restart must be newer than the writes they remove, also
// for a spool that an earlier, unmanaged hookpace wrote.
func TestDeletesAfterRestartRemoveOlderWrites(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()

	// An unmanaged Badger writes three records, as hookpace did before.
	old, err := badger.Open(BadgerOptions(filepath.Join(dir, "queue"), slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		m := newMsg("a.example", i)
		err := old.Update(func(txn *badger.Txn) error {
			return txn.Set(queueKey(m.Host, uint64(i+1)), m.encode(nil))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	for round := range 3 {
		s := openTest(t, dir, Options{})
		ms, err := s.Read("a.example", 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		want := 2 // what the previous round appended
		if round == 0 {
			want = 3
		}
		if len(ms) != want || s.Usage().Messages != int64(want) {
			t.Fatalf("round %d: read %d, usage %d messages, want %d", round, len(ms), s.Usage().Messages, want)
		}
		for _, m := range ms {
			if err := s.Delete(m); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 2 {
			if err := s.Append(ctx, newMsg("a.example", 10*round+i), 0); err != nil {
				t.Fatal(err)
			}
		}
		waitUsage(t, s, 2)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBadgerErrorDuringCommitFailsIt: Badger only logs some failures, such
// as a failed fsync of the value log. An error it logs while a round is
// committing must turn that round's appends into errors, not 202s; the
// next round is unaffected.
func TestBadgerErrorDuringCommitFailsIt(t *testing.T) {
	var fail atomic.Bool
	s := openTest(t, t.TempDir(), Options{whileCommitting: func(db *badger.DB) {
		if fail.Swap(false) {
			db.Opts().Logger.Errorf("Error while curlf sync: %v", "simulated")
		}
	}})
	defer s.Close()
	fail.Store(true)
	err := s.Append(t.Context(), newMsg("a.example", 1), 0)
	var werr *WriteError
	if !errors.As(err, &werr) {
		t.Fatalf("append during a Badger error: %v, want a *WriteError", err)
	}
	if err := s.Append(t.Context(), newMsg("a.example", 2), 0); err != nil {
		t.Fatalf("next append: %v", err)
	}
}

// TestUnwaitedOpsAreCommitted: ops nobody waits for (burials here) linger
// for company, but are committed on their own when none comes.
func TestUnwaitedOpsAreCommitted(t *testing.T) {
	var committing atomic.Pointer[chan struct{}]
	s := openTest(t, t.TempDir(), Options{whileCommitting: func(db *badger.DB) {
		if ch := committing.Load(); ch != nil {
			close(*ch)
			committing.Store(nil)
		}
	}})
	defer s.Close()
	var msgs []*Message
	for i := range 3 {
		m := newMsg("a.example", i)
		if err := s.Append(t.Context(), m, 0); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	ch := make(chan struct{})
	committing.Store(&ch)
	for _, m := range msgs {
		s.Bury(m, "test", time.Now())
	}
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal("burials with nobody waiting were never committed")
	}
	waitUsage(t, s, 0)
}

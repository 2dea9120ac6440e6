package spool

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// testClock is an injected clock for key expiry.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Concurrent appends of one key, held in one round by a writer that is
// busy committing the round before: one message is stored, every caller
// gets its id, and exactly one is not a duplicate.
func TestOnceConcurrentDuplicatesInOneRound(t *testing.T) {
	const n = 10
	block, blocked := make(chan struct{}), make(chan struct{})
	var first sync.Once
	opts := Options{whileCommitting: func(*badger.DB) {
		first.Do(func() { close(blocked); <-block })
	}}
	s := openTest(t, t.TempDir(), opts)
	defer s.Close()
	ctx := context.Background()
	go s.Append(ctx, newMsg("b.example", 0), 0) // the round the writer is busy with
	<-blocked

	type result struct {
		id  uint64
		dup bool
		err error
	}
	results := make(chan result, n)
	for i := range n {
		go func() {
			m := newMsg("a.example", i)
			dup, err := s.AppendOnce(ctx, m, 0, "evt_77", time.Hour)
			results <- result{m.ID, dup, err}
		}()
	}
	// Wait until all n are pending: the writer is blocked, so this test
	// is the only one waiting on the spool's condition.
	s.mu.Lock()
	for len(s.pending) < n {
		s.cond.Wait()
	}
	s.mu.Unlock()
	close(block)

	var id uint64
	stored := 0
	for range n {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		if !r.dup {
			stored++
		}
		if id == 0 {
			id = r.id
		}
		if r.id != id || r.id == 0 {
			t.Fatalf("ids %d and %d for one key", id, r.id)
		}
	}
	if stored != 1 {
		t.Fatalf("%d appends stored, want 1", stored)
	}
	got, err := s.Read("a.example", 0, 100)
	if err != nil || len(got) != 1 || got[0].ID != id {
		t.Fatalf("queue holds %d messages (%v), want 1 with id %d", len(got), err, id)
	}
	u := s.Usage()
	if u.Messages != 2 || u.DedupeKeys != 1 {
		t.Fatalf("usage %d messages, %d keys; want 2 and 1", u.Messages, u.DedupeKeys)
	}
	if d := s.Deduped()["a.example"]; d != n-1 {
		t.Fatalf("deduped %d, want %d", d, n-1)
	}
}

// Concurrent appends of several keys from many goroutines, rounds as they
// come: one message per key.
func TestOnceConcurrentDuplicates(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	ctx := context.Background()
	keys := []string{"k1", "k2", "k3", "k4"}
	ids := make([][]uint64, len(keys))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := i % len(keys)
			m := newMsg("a.example", i)
			if _, err := s.AppendOnce(ctx, m, 0, keys[k], time.Hour); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			ids[k] = append(ids[k], m.ID)
			mu.Unlock()
		}()
	}
	wg.Wait()
	for k, got := range ids {
		for _, id := range got {
			if id != got[0] {
				t.Fatalf("key %s got ids %v", keys[k], got)
			}
		}
	}
	if u := s.Usage(); u.Messages != int64(len(keys)) || u.DedupeKeys != int64(len(keys)) {
		t.Fatalf("usage %d messages, %d keys; want %d", u.Messages, u.DedupeKeys, len(keys))
	}
}

// A key outlives its message's delivery, its burial and a restart.
func TestOnceAcrossReopenDeliveredAndDead(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := openTest(t, dir, Options{})
	delivered, buried := newMsg("a.example", 1), newMsg("a.example", 2)
	for k, m := range map[string]*Message{"delivered": delivered, "buried": buried} {
		if dup, err := s.AppendOnce(ctx, m, 0, k, time.Hour); err != nil || dup {
			t.Fatalf("first append of %s: dup %v, %v", k, dup, err)
		}
	}
	if err := s.Delete(delivered); err != nil {
		t.Fatal(err)
	}
	s.Bury(buried, "gone", time.Now())
	flush(t, s)
	// The queue is empty: dropping it keeps the keys (in the kept database).
	key := onceKey("a.example", "delivered")
	inQueue := func() bool {
		q := s.queue.NewTransactionAt(math.MaxUint64, false)
		defer q.Discard()
		_, _, ok := getOnce(q, key)
		return ok
	}
	if !inQueue() {
		t.Fatal("the key record is not written with its message")
	}
	s.reclaim()
	if inQueue() {
		t.Fatal("the queue database was not dropped")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTest(t, dir, Options{})
	defer s.Close()
	if u := s.Usage(); u.Messages != 0 || u.DedupeKeys != 2 || u.DedupeBytes == 0 {
		t.Fatalf("after reopen: %d messages, %d keys (%d bytes); want 0 and 2", u.Messages, u.DedupeKeys, u.DedupeBytes)
	}
	for k, want := range map[string]uint64{"delivered": delivered.ID, "buried": buried.ID} {
		m := newMsg("a.example", 3)
		dup, err := s.AppendOnce(ctx, m, 0, k, time.Hour)
		if err != nil || !dup || m.ID != want {
			t.Fatalf("repeat of %s: dup %v id %d (%v); want the first id %d", k, dup, m.ID, err, want)
		}
	}
	other := newMsg("b.example", 4) // the key is per host
	if dup, err := s.AppendOnce(ctx, other, 0, "delivered", time.Hour); err != nil || dup {
		t.Fatalf("same key for another host: dup %v, %v", dup, err)
	}
	if other.ID <= max(delivered.ID, buried.ID) {
		t.Fatalf("new webhook got id %d, at or below a remembered id", other.ID)
	}
	waitUsage(t, s, 1)
}

// A key is forgotten when its window is over, by the injected clock, and
// the sweep removes it and its count.
func TestOnceWindowExpires(t *testing.T) {
	clock := &testClock{t: time.Unix(1800000000, 0)}
	s := openTest(t, t.TempDir(), Options{Now: clock.now})
	defer s.Close()
	ctx := context.Background()
	first := newMsg("a.example", 1)
	if _, err := s.AppendOnce(ctx, first, 0, "evt", time.Minute); err != nil {
		t.Fatal(err)
	}
	clock.add(time.Minute - time.Nanosecond)
	m := newMsg("a.example", 2)
	if dup, err := s.AppendOnce(ctx, m, 0, "evt", time.Minute); err != nil || !dup || m.ID != first.ID {
		t.Fatalf("inside the window: dup %v id %d (%v)", dup, m.ID, err)
	}
	if n, err := s.sweepOnce(); err != nil || n != 0 {
		t.Fatalf("sweep inside the window removed %d (%v)", n, err)
	}
	clock.add(time.Nanosecond)
	again := newMsg("a.example", 3)
	if dup, err := s.AppendOnce(ctx, again, 0, "evt", time.Minute); err != nil || dup || again.ID == first.ID {
		t.Fatalf("after the window: dup %v id %d (%v)", dup, again.ID, err)
	}
	if u := s.Usage(); u.Messages != 2 || u.DedupeKeys != 1 {
		t.Fatalf("renewed key: %d messages, %d keys", u.Messages, u.DedupeKeys)
	}
	clock.add(time.Minute)
	if n, err := s.sweepOnce(); err != nil || n != 1 {
		t.Fatalf("sweep after the window removed %d (%v), want 1", n, err)
	}
	if u := s.Usage(); u.DedupeKeys != 0 || u.DedupeBytes != 0 {
		t.Fatalf("after the sweep: %d keys, %d bytes", u.DedupeKeys, u.DedupeBytes)
	}
}

// Beyond dedupe_max_keys new keys are not remembered: the webhook is
// stored, and a repeat is stored again.
func TestOnceBoundedByCount(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{DedupeMaxKeys: 2})
	defer s.Close()
	ctx := context.Background()
	for i, k := range []string{"a", "b", "c", "c"} {
		m := newMsg("a.example", i)
		if dup, err := s.AppendOnce(ctx, m, 0, k, time.Hour); err != nil || dup {
			t.Fatalf("append %d (%s): dup %v, %v", i, k, dup, err)
		}
	}
	if u := s.Usage(); u.Messages != 4 || u.DedupeKeys != 2 {
		t.Fatalf("%d messages, %d keys; want 4 and 2", u.Messages, u.DedupeKeys)
	}
	m := newMsg("a.example", 9)
	if dup, err := s.AppendOnce(ctx, m, 0, "a", time.Hour); err != nil || !dup {
		t.Fatalf("a remembered key: dup %v, %v", dup, err)
	}
}

// ForgetKeys removes the keys that name the webhooks it is given, from
// either database, and no other.
func TestForgetKeysOfDroppedWebhooks(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	ctx := context.Background()
	a, b := newMsg("a.example", 1), newMsg("a.example", 2)
	ka, kb := Keys{Idempotency: "a", Window: time.Hour}, Keys{Idempotency: "b", Window: time.Hour}
	for i, m := range []*Message{a, b} {
		if _, err := s.AppendKeys(ctx, m, 0, []Keys{ka, kb}[i]); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.ForgetKeys([]*Message{a}); n != 1 || err != nil {
		t.Fatalf("ForgetKeys: %d, %v; want 1 removed", n, err)
	}
	if u := s.Usage(); u.DedupeKeys != 1 {
		t.Fatalf("keys remembered: %d, want 1", u.DedupeKeys)
	}
	if got, err := s.AppendKeys(ctx, newMsg("a.example", 1), 0, ka); got != Stored || err != nil {
		t.Fatalf("a repeat of the forgotten key: %v, %v; want Stored", got, err)
	}
	if got, err := s.AppendKeys(ctx, newMsg("a.example", 2), 0, kb); got != Duplicate || err != nil {
		t.Fatalf("a repeat of the other key: %v, %v; want Duplicate", got, err)
	}
}

// A sweep removes every expired key it finds, however many more that is
// than one transaction of Badger's takes (by count, here: short keys, a
// small memtable): it removes them in parts.
func TestSweepOverTheTransactionLimit(t *testing.T) {
	clock := &testClock{t: time.Unix(1800000000, 0)}
	s := openTest(t, t.TempDir(), Options{Now: clock.now, tuneQueue: smallTxns})
	defer s.Close()
	ms, ks := keyedMsgs("a.example", 1000, 10)
	for i := range ks {
		ks[i].Idempotency = fmt.Sprintf("k%04d", i)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(ms))
	for i, m := range ms {
		wg.Go(func() { _, errs[i] = s.AppendKeys(context.Background(), m, 0, ks[i]) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	clock.add(2 * time.Hour)
	if n, err := s.sweepOnce(); err != nil || n != len(ms) {
		t.Fatalf("the sweep removed %d expired keys (%v), want %d", n, err, len(ms))
	}
	if u := s.Usage(); u.DedupeKeys != 0 || u.DedupeBytes != 0 {
		t.Fatalf("after the sweep: %d keys, %d bytes", u.DedupeKeys, u.DedupeBytes)
	}
}

package spool

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// memReplica is an in-memory Replica: it stores the copies it takes, or
// refuses every round while refuse is set. With gate, Publish waits for
// the gate to open first.
type memReplica struct {
	gate chan struct{} // nil: none

	mu     sync.Mutex
	refuse error
	recs   map[string]Replicated
	rounds int // publishes
}

func newMemReplica() *memReplica { return &memReplica{recs: map[string]Replicated{}} }

func (r *memReplica) Publish(recs []Replicated) error {
	if r.gate != nil {
		<-r.gate
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rounds++
	if r.refuse != nil {
		return r.refuse
	}
	for _, rec := range recs {
		r.recs[rec.Key] = rec
	}
	return nil
}

func (r *memReplica) Remove(keys []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		delete(r.recs, k)
	}
}

func (r *memReplica) setRefuse(err error) {
	r.mu.Lock()
	r.refuse = err
	r.mu.Unlock()
}

func (r *memReplica) copies() map[string]Replicated {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]Replicated, len(r.recs))
	for k, v := range r.recs {
		out[k] = v
	}
	return out
}

// The publish returns only once the round's local commit has begun (the
// gate opens in whileCommitting): a writer that awaited the publish before
// committing would never commit. The refusal then comes after the local
// commit, which must be undone: no trace of the webhook (nor of its
// idempotency key) is left, before or after a reopen.
func TestRefusedPublishAfterTheLocalCommitLeavesNoTrace(t *testing.T) {
	dir := t.TempDir()
	rep := newMemReplica()
	rep.gate = make(chan struct{})
	rep.setRefuse(errors.New("stream down"))
	var open sync.Once
	s := openTest(t, dir, Options{Replica: rep, whileCommitting: func(*badger.DB) {
		open.Do(func() { close(rep.gate) })
	}})

	keys := Keys{Idempotency: "k1", Window: time.Hour}
	m := newMsg("a.example", 1)
	got, err := s.AppendKeys(context.Background(), m, 0, keys)
	var werr *WriteError
	if !errors.As(err, &werr) || !errors.Is(werr.Err, ErrReplication) {
		t.Fatalf("append refused by the replica: %v (%v), want a WriteError with ErrReplication", got, err)
	}
	requireNothingQueued(t, s, "after the refusal")
	if n := len(rep.copies()); n != 0 {
		t.Fatalf("the replica holds %d copies", n)
	}

	// The idempotency record was undone with the webhook: a retry is
	// stored, not answered as a duplicate of what was refused.
	rep.setRefuse(nil)
	retry := newMsg("a.example", 1)
	if got, err := s.AppendKeys(context.Background(), retry, 0, keys); err != nil || got != Stored {
		t.Fatalf("retry after the refusal: %v, %v; want Stored", got, err)
	}
	if _, ok := rep.copies()[s.Key(retry)]; !ok {
		t.Fatalf("the retry has no copy in the replica")
	}
	if err := s.Delete(retry); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTest(t, dir, Options{})
	defer s.Close()
	requireNothingQueued(t, s, "after a reopen")
}

func requireNothingQueued(t *testing.T, s *Spool, when string) {
	t.Helper()
	ms, err := s.Queued("a.example", 10)
	if err != nil {
		t.Fatal(err)
	}
	txn := s.ReadQueue()
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{Prefix: laneHostPrefix("a.example")})
	defer it.Close()
	keys := 0
	for it.Rewind(); it.Valid(); it.Next() {
		keys++
	}
	qit := txn.NewIterator(badger.IteratorOptions{Prefix: queuePrefix("a.example")})
	defer qit.Close()
	for qit.Rewind(); qit.Valid(); qit.Next() {
		keys++
	}
	if len(ms) != 0 || keys != 0 || s.Usage().Messages != 0 {
		t.Fatalf("%s: %d queued, %d keys in the queue database, usage %d; want none", when, len(ms), keys, s.Usage().Messages)
	}
}

// While a round's publish is in flight, its webhooks are committed locally
// but not shown: no reader of the queue returns them, and their
// idempotency key is not found, until the replica has taken them.
func TestRoundIsHiddenUntilTheReplicaTakesIt(t *testing.T) {
	dir := t.TempDir()
	rep := newMemReplica()
	rep.gate = make(chan struct{})
	s := openTest(t, dir, Options{Replica: rep})

	keys := Keys{Idempotency: "k2", Window: time.Hour}
	m := newMsg("a.example", 1)
	done := make(chan error, 1)
	go func() {
		_, err := s.AppendKeys(context.Background(), m, 0, keys)
		done <- err
	}()
	// The publish waits for the gate: once the round's record is in the
	// queue database, its commit is done and the publish still in flight.
	for !committed(s, "a.example") {
		runtime.Gosched()
	}
	if ms, err := s.Queued("a.example", 10); err != nil || len(ms) != 0 {
		t.Fatalf("a round in flight is read: %d messages, %v", len(ms), err)
	}
	if ms, err := s.ReadLane("a.example", Lane{}, 0, 10); err != nil || len(ms) != 0 {
		t.Fatalf("a round in flight is read by ReadLane: %d messages, %v", len(ms), err)
	}
	if _, ok, err := s.Oldest("a.example"); ok || err != nil {
		t.Fatalf("a round in flight has an oldest message")
	}
	key := scopedOnceKey("a.example", "", "k2")
	if _, _, ok := s.lookupOnce(key); ok {
		t.Fatalf("the idempotency key of a round in flight is found")
	}
	close(rep.gate)
	if err := <-done; err != nil {
		t.Fatalf("append taken by the replica: %v", err)
	}
	if _, ok := rep.copies()[s.Key(m)]; !ok {
		t.Fatalf("no copy of the appended webhook in the replica")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, Options{Replica: rep})
	defer s.Close()
	ms, err := s.Queued("a.example", 10)
	if err != nil || len(ms) != 1 || ms[0].ID != m.ID || string(ms[0].Body) != string(m.Body) {
		t.Fatalf("after a reopen: %v, %v; want the appended webhook", ms, err)
	}
	if _, _, ok := s.lookupOnce(key); !ok {
		t.Fatalf("the idempotency key of a settled round is not found")
	}
}

// committed reports whether the queue database holds a record of host's.
func committed(s *Spool, host string) bool {
	txn := s.ReadQueue()
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{Prefix: queuePrefix(host)})
	defer it.Close()
	it.Rewind()
	return it.Valid()
}

// A round with a coalesced replacement cannot be undone exactly: it is
// published before it commits, and a refusal leaves the replaced webhook
// as it was.
func TestRefusedReplacementKeepsTheWebhookItWouldReplace(t *testing.T) {
	var commits, atPublish atomic.Int64
	rep := &recordingReplica{memReplica: newMemReplica(), before: func() { atPublish.Store(commits.Load()) }}
	s := openTest(t, t.TempDir(), Options{Replica: rep, whileCommitting: func(*badger.DB) { commits.Add(1) }})
	defer s.Close()
	first := newMsg("a.example", 1)
	if _, err := s.AppendKeys(context.Background(), first, 0, Keys{Coalesce: "c"}); err != nil {
		t.Fatal(err)
	}
	rep.setRefuse(errors.New("stream down"))
	before := commits.Load()
	update := newMsg("a.example", 2)
	got, err := s.AppendKeys(context.Background(), update, 0, Keys{Coalesce: "c"})
	if !errors.Is(err, ErrReplication) {
		t.Fatalf("refused replacement: %v, %v; want ErrReplication", got, err)
	}
	if n := atPublish.Load(); n != before {
		t.Fatalf("the replacement was published after %d commits of its round, want before any", n-before)
	}
	ms, err := s.Queued("a.example", 10)
	if err != nil || len(ms) != 1 || string(ms[0].Body) != string(first.Body) {
		t.Fatalf("queued after a refused replacement: %v, %v; want the first webhook unchanged", ms, err)
	}
}

// recordingReplica calls before as each publish starts.
type recordingReplica struct {
	*memReplica
	before func()
}

func (r *recordingReplica) Publish(recs []Replicated) error {
	r.before()
	return r.memReplica.Publish(recs)
}

// A replayed dead letter whose publish is refused after the local commit
// is undone too: it stays a dead letter, and nothing is queued.
func TestRefusedReplayStaysDead(t *testing.T) {
	dir := t.TempDir()
	rep := newMemReplica()
	s := openTest(t, dir, Options{Replica: rep})
	if err := s.Append(context.Background(), newMsg("a.example", 1), 0); err != nil {
		t.Fatal(err)
	}
	ms, err := s.Read("a.example", 0, 10)
	if err != nil || len(ms) != 1 {
		t.Fatalf("read: %d, %v", len(ms), err)
	}
	s.Bury(ms[0], "permanent status 410", time.Unix(1700000100, 0))
	waitUsage(t, s, 0)
	rep.setRefuse(errors.New("stream down"))
	if n, err := s.ReplayDead(DeadFilter{}); n != 0 || !errors.Is(err, ErrReplication) {
		t.Fatalf("replay refused by the replica: %d, %v; want 0 and ErrReplication", n, err)
	}
	requireNothingQueued(t, s, "after the refused replay")
	if u := s.Usage(); u.Dead != 1 {
		t.Fatalf("dead letters after the refused replay: %d, want 1", u.Dead)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, Options{Replica: rep})
	defer s.Close()
	requireNothingQueued(t, s, "after a reopen")
	rep.setRefuse(nil)
	if n, err := s.ReplayDead(DeadFilter{}); n != 1 || err != nil {
		t.Fatalf("replay taken by the replica: %d, %v", n, err)
	}
	if ms, err := s.Queued("a.example", 10); err != nil || len(ms) != 1 {
		t.Fatalf("queued after the replay: %d, %v; want 1", len(ms), err)
	}
	if n := len(rep.copies()); n != 1 {
		t.Fatalf("copies in the replica: %d, want 1", n)
	}
}

// A reader loads shown, then reads. One that loads it before the first
// round after Open must not cover that round's ids: they are committed
// locally before the replica has them, and may be refused. Oldest is
// played here step by step (shown, then the read, with the round's
// commit in between), through its firstEnqueued.
func TestShownAtOpenCoversOnlyWhatIsQueued(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{})
	if err := s.Append(context.Background(), newMsg("a.example", 1), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	rep := newMemReplica()
	rep.gate = make(chan struct{})
	rep.setRefuse(errors.New("stream down"))
	s = openTest(t, dir, Options{Replica: rep})
	defer s.Close()
	if ms, err := s.Queued("a.example", 10); err != nil || len(ms) != 1 {
		t.Fatalf("the webhook queued before the open: %d read, %v; want 1", len(ms), err)
	}

	shown := s.shown.Load() // a reader, before the first round
	done := make(chan error, 1)
	go func() { done <- s.Append(context.Background(), newMsg("b.example", 2), 0) }()
	for !committed(s, "b.example") {
		runtime.Gosched()
	}
	txn := s.ReadQueue()
	_, seen, err := firstEnqueued(txn, queuePrefix("b.example"), shown)
	txn.Discard()
	close(rep.gate)
	if err := <-done; !errors.Is(err, ErrReplication) {
		t.Fatalf("append refused by the replica: %v, want ErrReplication", err)
	}
	if err != nil || seen {
		t.Fatalf("a reader that loaded shown (%d) at open read the first round's webhook before the replica took it (%v)", shown, err)
	}
}

// A repeat of an idempotency key that arrives while the first webhook's
// round is unsettled misses the lookup (the id is not shown) and goes to
// the writer, which takes it in the next round, once the first is
// settled: a Duplicate of it when the replica took it, stored anew when
// the replica refused it. Either way one webhook is queued.
func TestRepeatDuringAnUnsettledRound(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		rep := &scriptedReplica{memReplica: newMemReplica(), verdicts: make(chan error)}
		s := openTest(t, t.TempDir(), Options{Replica: rep})
		keys := Keys{Idempotency: "k", Window: time.Hour}
		first, repeat := newMsg("a.example", 1), newMsg("a.example", 1)
		firstDone := make(chan error, 1)
		go func() {
			_, err := s.AppendKeys(context.Background(), first, 0, keys)
			firstDone <- err
		}()
		for !committed(s, "a.example") {
			runtime.Gosched()
		}
		type result struct {
			got Appended
			err error
		}
		repeatDone := make(chan result, 1)
		go func() {
			got, err := s.AppendKeys(context.Background(), repeat, 0, keys)
			repeatDone <- result{got, err}
		}()
		for pending := 0; pending == 0; runtime.Gosched() {
			s.mu.Lock()
			pending = len(s.pending)
			s.mu.Unlock()
		}
		var verdict error
		if refuse {
			verdict = errors.New("stream down")
		}
		rep.verdicts <- verdict // the first round's
		err := <-firstDone
		if refuse {
			rep.verdicts <- nil // the repeat's own round
		}
		r := <-repeatDone
		ms, qerr := s.Queued("a.example", 10)
		if qerr != nil || len(ms) != 1 {
			t.Fatalf("refuse %v: %d queued (%v), want 1", refuse, len(ms), qerr)
		}
		switch {
		case !refuse && (err != nil || r.err != nil || r.got != Duplicate || repeat.ID != first.ID):
			t.Fatalf("taken: first %v; repeat %v, %v, id %d; want a Duplicate of %d", err, r.got, r.err, repeat.ID, first.ID)
		case refuse && (!errors.Is(err, ErrReplication) || r.err != nil || r.got != Stored || ms[0].ID != repeat.ID):
			t.Fatalf("refused: first %v; repeat %v, %v; want the repeat stored", err, r.got, r.err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// scriptedReplica takes each publish's verdict from verdicts, in order:
// nil stores the copies, an error refuses them.
type scriptedReplica struct {
	*memReplica
	verdicts chan error
}

func (r *scriptedReplica) Publish(recs []Replicated) error {
	if err := <-r.verdicts; err != nil {
		return err
	}
	return r.memReplica.Publish(recs)
}

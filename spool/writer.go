package spool

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

type opKind uint8

const (
	opAppend opKind = iota // new message: durable before the caller returns
	opDelete               // delivered: remove
	opUpdate               // attempt failed: rewrite delivery state
	opBury                 // permanently failed: move to the dead letters
	opRevive               // dead letter replayed: back into its host's queue
	opPurge                // dead letter removed for good
	opFailed               // not applied
)

type op struct {
	kind opKind
	msg  *Message
	key  []byte
	val  []byte
	size int64  // stored size of the record written (append, update, revive)
	old  int64  // stored size before this op (delete, update, bury)
	dead uint64 // dead-letter id (revive, purge)
	done chan error
}

// maxBatch bounds one group commit so that a flood of writers still gets
// acknowledgements at a steady pace.
const maxBatch = 1024

// Append makes m durable and assigns its ID. It returns only once the write
// is fsync'd, so the caller may acknowledge the webhook. hostLimit is the
// host's max_queued (0 for none). A *FullError means backpressure; a
// *WriteError means the write did not happen durably.
func (s *Spool) Append(ctx context.Context, m *Message, hostLimit int64) error {
	val := m.record()
	o := &op{kind: opAppend, msg: m, val: val, done: make(chan error, 1)}
	o.size = int64(len(val)) + int64(len(m.Host)) + 10
	if err := s.admit(m.Host, o.size, hostLimit); err != nil {
		return err
	}
	done := o.done // the writer owns o once it is submitted
	if err := s.submit(o); err != nil {
		s.unreserve(m.Host, o.size)
		return err
	}
	// The wait ignores ctx: once submitted, the write happens regardless, and
	// its outcome must be known before answering.
	if err := <-done; err != nil {
		return err
	}
	m.size = o.size
	return nil
}

func (s *Spool) unreserve(host string, size int64) {
	s.mu.Lock()
	s.account(host, -1, -size)
	s.mu.Unlock()
}

// Delete removes a delivered message and returns once the removal is
// durable. Until then a crash would deliver the message again
// (at-least-once); the dispatcher keeps the delivery's slot meanwhile, so
// a crash repeats no more than the deliveries in flight.
func (s *Spool) Delete(m *Message) error {
	return s.submitWait(&op{kind: opDelete, msg: m, key: queueKey(m.Host, m.ID), old: m.size})
}

// Update persists m's delivery state (attempts, last status and error)
// after a failed attempt, without waiting for the write.
func (s *Spool) Update(m *Message) {
	val := m.record()
	o := &op{kind: opUpdate, msg: m, key: queueKey(m.Host, m.ID), val: val, old: m.size}
	o.size = int64(len(val)) + int64(len(m.Host)) + 10
	m.size = o.size
	s.submit(o)
}

// Bury moves m to the dead letters with the reason it failed for good.
func (s *Spool) Bury(m *Message, reason string, at time.Time) {
	d := &Dead{Message: m, Reason: reason, DiedAt: at}
	s.submit(&op{kind: opBury, msg: m, key: queueKey(m.Host, m.ID), val: d.encode(), old: m.size})
}

// submit hands an op to the writer goroutine.
func (s *Spool) submit(o *op) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.pending = append(s.pending, o)
	if o.done != nil {
		s.waiting++
	}
	if len(s.pending) == 1 || o.done != nil {
		s.cond.Signal()
	}
	s.mu.Unlock()
	return nil
}

// submitWait submits an op and waits for the writer's verdict.
func (s *Spool) submitWait(o *op) error {
	done := make(chan error, 1)
	o.done = done
	if err := s.submit(o); err != nil {
		return err
	}
	return <-done
}

// lingerFor is how long ops that nobody waits for (delivery state after a
// failed attempt, burials) may wait for company before they are committed:
// every commit costs an fsync. An op with a waiter (an append, a delete
// after delivery) ends the wait.
const lingerFor = 5 * time.Millisecond

// writeLoop is the only goroutine that writes to the queue. Each round
// takes everything pending and commits it in one transaction, which Badger
// fsyncs before the commit returns (SyncWrites: see BadgerOptions); only
// then are the waiters told. While a round commits, the next accumulates,
// so one fsync serves every writer that arrived during the previous one.
func (s *Spool) writeLoop() {
	defer close(s.writerDone)
	linger := time.AfterFunc(time.Hour, func() {
		s.mu.Lock()
		s.lingerUp = true
		s.cond.Signal()
		s.mu.Unlock()
	})
	linger.Stop()
	for {
		s.mu.Lock()
		for !s.roundDueLocked() {
			if len(s.pending) > 0 && !s.lingering {
				s.lingering = true
				linger.Reset(lingerFor)
			}
			s.cond.Wait()
		}
		if len(s.pending) == 0 {
			s.mu.Unlock()
			return // closed, and everything pending is written
		}
		if s.lingering {
			linger.Stop() // if it fires anyway, the next round starts early
			s.lingering = false
		}
		s.lingerUp = false
		n := min(len(s.pending), maxBatch)
		batch := make([]*op, n)
		copy(batch, s.pending[:n])
		rest := copy(s.pending, s.pending[n:])
		clear(s.pending[rest:])
		s.pending = s.pending[:rest]
		for _, o := range batch {
			if o.done != nil {
				s.waiting--
			}
		}
		s.mu.Unlock()
		s.finish(s.commit(batch))
		// Let the handlers just answered run before the next round. Go's
		// scheduler would otherwise run the next commit's Badger
		// goroutines first on this P (each is readied as "runnext"), and
		// every 202 of this round would wait behind that commit's CPU work.
		runtime.Gosched()
	}
}

// roundDueLocked reports whether the writer should take a round now:
// someone waits for an op, a round's worth is pending, the linger is over,
// or the spool is closing.
func (s *Spool) roundDueLocked() bool {
	return s.closed || s.waiting > 0 || len(s.pending) >= maxBatch || s.lingerUp && len(s.pending) > 0
}

// queueIsEmpty reports whether the queue database holds no live message,
// and enough dead space to be worth dropping: every message counted is an
// append still waiting to be written.
func (s *Spool) queueIsEmpty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dirty < reclaimAfter || s.messages > int64(len(s.pending)) {
		return false
	}
	reserved := int64(0)
	for _, o := range s.pending {
		if o.kind == opAppend {
			reserved++
		}
	}
	return s.messages == reserved
}

// txnBudget bounds the bytes staged in one Badger transaction, far below
// Badger's own limit (15% of the memtable), so that a transaction is only
// ever cut between ops.
const txnBudget = 1 << 20

// round is one group commit.
type round struct {
	batch  []*op
	queued []*op // ops written to the queue database
	buried []*op
	after  []*op // dead letters to remove once the queue write is durable
	err    error // the queue write failed: every queued op fails
}

// commit writes one round of ops durably. The order keeps every message
// durable somewhere at every moment: a buried message is in the dead
// letters before its queue delete is written, and a replayed one is in the
// queue before its dead letter is removed (in finish).
func (s *Spool) commit(batch []*op) *round {
	batch = s.refuseUnsafeAppends(batch)
	r := &round{batch: batch}
	for _, o := range batch {
		switch o.kind {
		case opBury:
			r.buried = append(r.buried, o)
		case opPurge:
			r.after = append(r.after, o)
		}
	}
	if len(r.buried) > 0 {
		if err := s.apply(s.dead, r.buried, s.stageDead); err != nil {
			s.log.Error("spool: writing dead letters failed; the messages stay queued", "error", err, "ops", len(r.buried))
			for _, o := range r.buried {
				o.kind = opFailed
			}
		}
	}
	seq := s.seqSnapshot()
	for _, o := range batch {
		switch o.kind {
		case opAppend, opRevive, opDelete, opUpdate, opBury:
			r.queued = append(r.queued, o)
		}
	}
	r.err = s.apply(s.db, r.queued, func(txn *badger.Txn, o *op) error { return s.stageQueue(txn, o, &seq) })
	s.mu.Lock()
	s.seq = max(s.seq, seq) // ids staged in a committed part are never reused
	s.mu.Unlock()
	return r
}

// finish answers a round's waiters once it is durable (or has failed).
func (s *Spool) finish(r *round) {
	if r.err != nil {
		// Report every queue op of this round as failed. An append that did
		// reach disk in an earlier part is then delivered without having
		// been acknowledged, which at-least-once permits; nothing
		// acknowledged is lost. Usage is recounted from disk at the next
		// start.
		s.log.Error("spool: commit failed", "error", r.err, "ops", len(r.queued))
		s.settle(r.queued, false)
		werr := &WriteError{Err: r.err}
		for _, o := range r.queued {
			o.reply(werr)
		}
		return
	}
	for _, o := range r.queued {
		if o.kind == opRevive {
			r.after = append(r.after, o)
		}
	}
	if len(r.after) > 0 {
		if err := s.apply(s.dead, r.after, s.stageDeadRemoval); err != nil {
			// A replayed message whose dead letter could not be removed is
			// in both places: it may be replayed twice, never lost.
			s.log.Error("spool: removing dead letters failed", "error", err)
		}
	}
	s.settle(r.queued, true)
	s.mu.Lock()
	s.nDead -= int64(len(r.after)) // revived or purged
	for _, o := range r.buried {
		if o.kind == opBury {
			s.nDead++
		}
	}
	s.mu.Unlock()
	// Drop an emptied queue before answering, so that whoever learns the
	// queue is empty finds its space given back.
	if s.queueIsEmpty() {
		s.reclaim()
	}
	var appended []*Message
	for _, o := range r.batch {
		if o.kind == opAppend || o.kind == opRevive {
			appended = append(appended, o.msg)
		}
		if o.kind == opFailed {
			o.reply(&WriteError{Err: errors.New("dead letter not written")})
		} else {
			o.reply(nil)
		}
	}
	if len(appended) > 0 {
		s.announce(appended)
	}
}

// refuseUnsafeAppends fails the appends of a round while the spool cannot
// keep them, and logs when that starts and ends:
//   - free space is below MinFree;
//   - the queue directory is no longer the one opened (removed or replaced
//     underneath): Badger would go on writing into unlinked files, which
//     vanish when the process exits, so a 202 would be a lie.
//
// Deletes still go through: they are what frees space.
func (s *Spool) refuseUnsafeAppends(batch []*op) []*op {
	grows := false
	for _, o := range batch {
		grows = grows || o.kind == opAppend || o.kind == opRevive
	}
	if !grows {
		return batch
	}
	var why error
	if s.opts.MinFree > 0 {
		free, err := s.opts.diskFree(s.opts.Dir)
		full := err == nil && free < s.opts.MinFree
		s.mu.Lock()
		if full != s.diskFull {
			s.diskFull = full
			if full {
				s.log.Error("spool disk nearly full: answering 503 to new webhooks until space returns", "free", free, "min_free", s.opts.MinFree)
			} else {
				s.log.Warn("spool disk has space again: accepting webhooks", "free", free)
			}
		}
		s.mu.Unlock()
		if full {
			why = ErrDiskFull
		}
	}
	fi, err := os.Stat(filepath.Join(s.opts.Dir, "queue"))
	gone := err != nil || !os.SameFile(fi, s.queueDir)
	s.mu.Lock()
	changed := gone != s.dirGone
	s.dirGone = gone
	s.mu.Unlock()
	if changed {
		if gone {
			s.log.Error("spool directory removed or replaced underneath: answering 503 to new webhooks", "dir", s.opts.Dir, "error", err)
		} else {
			s.log.Warn("spool directory is back: accepting webhooks", "dir", s.opts.Dir)
		}
	}
	if gone {
		why = ErrDirGone
	}
	if why == nil {
		return batch
	}
	kept := batch[:0:0]
	var refused []*op
	for _, o := range batch {
		if o.kind == opAppend || o.kind == opRevive {
			refused = append(refused, o)
			continue
		}
		kept = append(kept, o)
	}
	// Give the reservations back before answering, so that a refused
	// caller never sees its own message still counted.
	s.settle(refused, false)
	for _, o := range refused {
		o.reply(&WriteError{Err: why})
	}
	return kept
}

// apply stages ops into as few transactions as the budget allows and
// commits them; each commit is fsync'd by Badger before it returns.
func (s *Spool) apply(db *badger.DB, ops []*op, stage func(*badger.Txn, *op) error) error {
	if len(ops) == 0 {
		return nil
	}
	// Badger logs, rather than returns, a failed fsync of the value log:
	// an error it reports while this commit runs fails the commit.
	reported := s.badgerErrors.Load()
	txn := s.newTxn(db)
	staged := 0
	for _, o := range ops {
		if staged > txnBudget {
			if err := s.commitTxn(db, txn); err != nil {
				return err
			}
			txn, staged = s.newTxn(db), 0
		}
		if err := stage(txn, o); err != nil {
			txn.Discard()
			return err
		}
		staged += len(o.val) + len(o.key) + 64
	}
	if s.opts.whileCommitting != nil {
		s.opts.whileCommitting(db)
	}
	if err := s.commitTxn(db, txn); err != nil {
		return err
	}
	if s.badgerErrors.Load() != reported {
		return errBadgerReported
	}
	return nil
}

// errBadgerReported fails a commit during which Badger logged an error.
var errBadgerReported = errors.New("badger reported an error during the commit (see the log)")

// newTxn starts a write transaction on db. The queue database is managed:
// only the writer goroutine writes to it, at timestamps it hands out.
func (s *Spool) newTxn(db *badger.DB) *badger.Txn {
	if db == s.db {
		return db.NewTransactionAt(s.ts, true)
	}
	return db.NewTransaction(true)
}

// commitTxn commits a transaction from newTxn. A queue transaction gets the
// next timestamp, which is never reused even if the commit fails; once it
// is committed, compaction and value-log GC may discard what it deleted or
// overwrote.
func (s *Spool) commitTxn(db *badger.DB, txn *badger.Txn) error {
	if db != s.db {
		return txn.Commit()
	}
	s.ts++
	if err := txn.CommitAt(s.ts, nil); err != nil {
		return err
	}
	db.SetDiscardTs(s.ts)
	return nil
}

// reply tells a waiting submitter the verdict; each op is replied to once.
func (o *op) reply(err error) {
	if o.done != nil {
		o.done <- err
	}
}

func (s *Spool) seqSnapshot() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq
}

// stageQueue adds o's writes to a queue transaction.
func (s *Spool) stageQueue(txn *badger.Txn, o *op, seq *uint64) error {
	switch o.kind {
	case opAppend, opRevive:
		id := *seq + 1
		if err := txn.Set(queueKey(o.msg.Host, id), o.val); err != nil {
			return err
		}
		*seq = id
		o.msg.ID = id
	case opDelete, opBury:
		return txn.Delete(queueKey(o.msg.Host, o.msg.ID))
	case opUpdate:
		return txn.Set(o.key, o.val)
	}
	return nil
}

func (s *Spool) stageDead(txn *badger.Txn, o *op) error {
	return txn.Set(deadKey(o.msg.ID), o.val)
}

func (s *Spool) stageDeadRemoval(txn *badger.Txn, o *op) error {
	return txn.Delete(deadKey(o.dead))
}

// reclaimAfter is how many bytes the queue database may accumulate before
// it is dropped, the next time the spool is empty.
const reclaimAfter = 16 << 20

// reclaim gives the queue database's disk space back once every message
// has left it: Badger's own compaction and value-log GC only catch up with
// deletes slowly, and an empty queue can be dropped whole. It runs on the
// writer goroutine, so no write can race it, and it first makes the id
// sequence durable in the dead-letter database, so ids never go backwards.
func (s *Spool) reclaim() {
	if err := s.saveSeq(); err != nil {
		return
	}
	start := time.Now()
	if err := s.db.DropAll(); err != nil {
		s.log.Warn("spool: could not drop the empty queue", "error", err)
		return
	}
	s.mu.Lock()
	s.dirty = 0
	s.mu.Unlock()
	s.log.Debug("spool: queue empty, disk space reclaimed", "took", time.Since(start).String())
}

// saveSeq makes the id sequence durable in the dead-letter database.
func (s *Spool) saveSeq() error {
	seq := s.seqSnapshot()
	err := s.dead.Update(func(txn *badger.Txn) error { return txn.Set(keySeq, be64(seq)) })
	if err != nil {
		s.log.Warn("spool: saving the id sequence failed", "error", err)
	}
	return err
}

// settle updates usage accounting for ops that were (ok) or were not
// written. Appends were reserved at admission and are released on failure.
func (s *Spool) settle(ops []*op, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, o := range ops {
		if !ok {
			if o.kind == opAppend {
				s.account(o.msg.Host, -1, -o.size)
			}
			continue
		}
		switch o.kind {
		case opAppend:
			s.dirty += o.size
		case opDelete:
			s.drain.add(now, 1)
			s.account(o.msg.Host, -1, -o.old)
		case opUpdate:
			s.account(o.msg.Host, 0, o.size-o.old)
			s.dirty += o.size
		case opBury:
			s.drain.add(now, 1)
			s.account(o.msg.Host, -1, -o.old)
		case opRevive:
			s.account(o.msg.Host, 1, o.size)
			s.dirty += o.size
		}
	}
	s.updateGateLocked()
}

func be64(v uint64) []byte {
	b := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
	return b
}

// Read returns up to max queued messages of host with ids above after, in
// FIFO order.
func (s *Spool) Read(host string, after uint64, max int) ([]*Message, error) {
	var out []*Message
	// The newest version of every key, as DB.View reads in managed mode.
	// Reading at an older timestamp would not be safe: versions at or
	// below the discard timestamp that a newer one shadows may already be
	// compacted away. A message a round is still writing may show up
	// before it is synced and announced; the dispatcher's cursor keeps it
	// from being taken twice.
	txn := s.db.NewTransactionAt(math.MaxUint64, false)
	defer txn.Discard()
	err := func() error {
		io := badger.DefaultIteratorOptions
		io.Prefix = queuePrefix(host)
		io.PrefetchSize = min(max, 100)
		it := txn.NewIterator(io)
		defer it.Close()
		for it.Seek(queueKey(host, after+1)); it.Valid() && len(out) < max; it.Next() {
			item := it.Item()
			_, id, ok := parseQueueKey(item.Key())
			if !ok {
				continue
			}
			err := item.Value(func(v []byte) error {
				m, err := decodeMessage(host, id, v)
				if err != nil {
					return err
				}
				m.size = int64(len(v)) + int64(len(host)) + 10
				out = append(out, m)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	}()
	return out, err
}

package spool

import (
	"errors"
	"runtime"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// maxBatch bounds one group commit so that a flood of writers still gets
// acknowledgements at a steady pace.
const maxBatch = 1024

// submit hands an op to the writer goroutine.
func (s *Spool) submit(o op) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.pending = append(s.pending, o)
	waits := o.base().done != nil
	if waits {
		s.waiting++
	}
	if len(s.pending) == 1 || waits {
		s.cond.Signal()
	}
	s.mu.Unlock()
	return nil
}

// submitWait submits an op and waits for the writer's verdict.
func (s *Spool) submitWait(o op) error {
	done := make(chan error, 1)
	o.base().done = done
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
// takes everything pending and commits it in one transaction, synced
// before the commit returns (see applyQueue); only then are the waiters
// told. While a round commits, the next accumulates, so one sync serves
// every writer that arrived during the previous one.
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
		batch := s.takeLocked()
		s.mu.Unlock()
		s.finish(s.commit(batch))
		// Let the handlers just answered run before the next round. Go's
		// scheduler would otherwise run the next commit's Badger
		// goroutines first on this P (each is readied as "runnext"), and
		// every 202 of this round would wait behind that commit's CPU work.
		runtime.Gosched()
	}
}

// takeLocked takes the next round's ops off the pending list.
func (s *Spool) takeLocked() []op {
	n := min(len(s.pending), maxBatch)
	batch := make([]op, n)
	copy(batch, s.pending[:n])
	rest := copy(s.pending, s.pending[n:])
	clear(s.pending[rest:])
	s.pending = s.pending[:rest]
	for _, o := range batch {
		if o.base().done != nil {
			s.waiting--
		}
	}
	return batch
}

// roundDueLocked reports whether the writer should take a round now:
// someone waits for an op, a round's worth is pending, the linger is over,
// or the spool is closing.
func (s *Spool) roundDueLocked() bool {
	return s.closed || s.waiting > 0 || len(s.pending) >= maxBatch || s.lingerUp && len(s.pending) > 0
}

// txnBudget bounds the bytes staged in one Badger transaction, far below
// Badger's own limit (15% of the memtable), so that a transaction is only
// ever cut between ops.
const txnBudget = 1 << 20

// round is one group commit.
type round struct {
	batch  []op
	queued []op  // ops written to the queue database
	err    error // the queue write failed: every queued op fails
}

// commit writes one round of ops durably, phase by phase (see phase); the
// last phase waits for finish, once the queue write is known to be
// durable.
func (s *Spool) commit(batch []op) *round {
	batch = s.refuseUnsafe(batch)
	s.resolveOnce(batch)
	s.resolveCoalesce(batch)
	r := &round{batch: batch}
	if buried := inPhase(batch, phaseKeptFirst); len(buried) > 0 {
		if err := s.applyKept(phaseKeptFirst, buried); err != nil {
			s.log.Error("spool: writing dead letters failed; the messages stay queued", "error", errText(err), "ops", len(buried))
			fail(buried, &WriteError{Err: errors.New("dead letter not written")})
		}
	}
	seq := s.seqSnapshot()
	r.queued = inPhase(batch, phaseQueue)
	// Each op takes at most one id (an op staged again in a transaction of
	// its own takes the same, apply); twice as many are made room for.
	if need := seq + 2*uint64(len(r.queued)); need > s.ceil {
		if err := s.raiseCeiling(need); err != nil {
			var adding []op
			for _, o := range r.queued {
				if o.adds() {
					adding = append(adding, o)
				}
			}
			fail(adding, &WriteError{Err: ErrStorage})
			r.queued = inPhase(batch, phaseQueue)
		}
	}
	if ahead := s.hist.Leaving(leaving(batch)); len(ahead) > 0 {
		// The outcomes, in the commit that removes their webhooks.
		r.queued = append([]op{&aheadOp{recs: ahead}}, r.queued...)
	}
	r.err = s.applyQueue(r.queued, &seq)
	if r.err == nil {
		s.unreplicate(r.queued)
	}
	s.mu.Lock()
	s.seq = max(s.seq, seq) // ids staged in a committed part are never reused
	s.mu.Unlock()
	return r
}

// inPhase returns the ops of batch that write in phase ph and have not
// failed.
func inPhase(batch []op, ph phase) []op {
	var out []op
	for _, o := range batch {
		if o.phases()&ph != 0 && o.base().err == nil {
			out = append(out, o)
		}
	}
	return out
}

func fail(ops []op, err error) {
	for _, o := range ops {
		o.base().err = err
	}
}

// finish completes a round once its queue write is durable (or has
// failed): it removes the dead letters that waited for it, settles the
// ledger, and only then answers the waiters and announces new messages.
func (s *Spool) finish(r *round) {
	if r.err != nil {
		// Report every queue op of this round as failed. An append that did
		// reach disk in an earlier part is then delivered without having
		// been acknowledged, which at-least-once permits; nothing
		// acknowledged is lost. Usage is recounted from disk at the next
		// start.
		s.log.Error("spool: commit failed", "error", errText(r.err), "ops", len(r.queued))
		werr := &WriteError{Err: ErrStorage}
		if errors.Is(r.err, errBadgerReported) {
			werr.Err = errBadgerReported
		}
		fail(inPhase(r.queued, phaseQueue), werr)
	}
	followPrimaries(r.batch)
	if after := inPhase(r.batch, phaseKeptAfter); len(after) > 0 {
		if err := s.applyKept(phaseKeptAfter, after); err != nil {
			s.log.Error("spool: removing dead letters failed", "error", errText(err))
		}
	}
	s.mu.Lock()
	now := time.Now()
	for _, o := range r.batch {
		if o.base().err == nil {
			o.settle(s.ledger, now)
		} else {
			o.release(s.ledger)
		}
	}
	s.settleCoalesces(r.batch)
	s.hist.Settled(changes(r.batch))
	s.ledger.gate()
	s.mu.Unlock()
	// Drop an emptied queue before answering, so that whoever learns the
	// queue is empty finds its space given back.
	if r.err == nil && s.queueIsEmpty() {
		s.reclaim()
	}
	var appended []*Message
	for _, o := range r.batch {
		if o.adds() && o.base().err == nil {
			appended = append(appended, o.base().msg)
		}
		o.base().reply()
	}
	if len(appended) > 0 {
		s.announce(appended)
	}
}

// apply stages ops' writes of phase ph into as few transactions on db as
// the budget allows and commits them. A commit is durable when it
// returns (SyncWrites), or once applyQueue or applyKept has synced it.
// With pub (queue writes of a spool with a replica), the round's appends
// are published to the replica: alongside the last commit when their
// writes can be undone (pub.done, awaited by applyQueue), else before it.
func (s *Spool) apply(db *badger.DB, ph phase, ops []op, seq *uint64, pub *publishing) error {
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
		var before uint64
		if seq != nil {
			before = *seq
		}
		err := o.stage(ph, txn, seq)
		if errors.Is(err, badger.ErrTxnTooBig) && staged > 0 {
			// Commit what is staged, and try the op in a transaction of
			// its own. What it staged before the limit (a message, not
			// its key record) is committed with the rest: staged again
			// under the ids it took, it is overwritten, not queued twice.
			if err := s.commitTxn(db, txn); err != nil {
				return err
			}
			txn, staged = s.newTxn(db), 0
			var took uint64
			if seq != nil {
				took, *seq = *seq, before
			}
			err = o.stage(ph, txn, seq)
			if seq != nil {
				*seq = max(*seq, took) // never handed out again, whatever became of the op
			}
		}
		if err != nil {
			// The store refused this op: it fails alone, and the rest of
			// the round goes on without it. Badger stages nothing of a
			// refused write, but an op of many writes may have staged
			// some before it: alone in its transaction (staged again
			// after the limit, or the first), it goes with the
			// transaction, and nothing of it is committed. A dead-letter
			// removal after the queue write only fails to clean up: the
			// op itself is durable.
			if staged == 0 {
				txn.Discard()
				txn = s.newTxn(db)
			}
			if ph != phaseKeptAfter {
				o.base().err = refusal(err)
			}
			s.log.Error("spool: the store refused a write", "op", o.kind(), "host", o.base().hostName(), "error", errText(err))
			continue
		}
		staged += o.weight()
	}
	if pub != nil && s.opts.Replica != nil {
		recs := s.replicas(ops)
		switch {
		case len(recs) == 0:
		case undoable(ops):
			pub.start(s.opts.Replica, recs)
		case len(s.published(ops, s.opts.Replica.Publish(recs))) > 0:
			// The round's appends failed: commit the rest without them.
			// Their ids are spent. An append committed in an earlier part
			// of this round stays queued, unacknowledged: at-least-once.
			txn.Discard()
			var rest []op
			for _, o := range ops {
				if o.base().err == nil {
					rest = append(rest, o)
				}
			}
			return s.apply(db, ph, rest, seq, nil)
		}
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

// applyQueue applies ops' queue writes (apply) and makes them durable:
// Badger syncs each commit itself (SyncWrites), or qlog syncs the round's
// commits once, after the last (see BadgerOptions).
//
// With a replica, the round's publish runs while the round commits and
// syncs, and is awaited after the sync; a publish the replica refused has
// the appends it carried undone, durably, before applyQueue returns. So
// no append is answered (finish) before it is both synced here and stored
// in the replica; and, as readers of the queue see no id of a round
// before the round is settled (hidden), a webhook the replica refused is
// never handed to the dispatcher. A crash between the round's commit and
// its undo leaves the refused webhooks queued here, never acknowledged:
// delivered after the restart (at-least-once; their clients retry).
func (s *Spool) applyQueue(ops []op, seq *uint64) error {
	s.queueMu.Lock()
	defer s.queueMu.Unlock()
	var pub *publishing
	if s.opts.Replica != nil {
		pub = &publishing{}
		s.shown.Store(*seq) // every earlier round is settled
		defer func() { s.shown.Store(*seq) }()
	}
	err := s.apply(s.queue, phaseQueue, ops, seq, pub)
	if s.qlog != nil && len(ops) > 0 {
		err = errors.Join(err, s.qlog.sync(mayLog(ops)))
	}
	if pub == nil || pub.done == nil {
		return err
	}
	refused := s.published(ops, <-pub.done)
	if len(refused) == 0 {
		return err
	}
	return errors.Join(err, s.undo(refused))
}

// undo removes, durably, what the appends ops wrote to the queue in a
// committed round (ops are undoable). Their deletes may be more than one
// transaction takes (the round itself may have been committed in parts):
// they are committed in as many as Badger needs.
func (s *Spool) undo(ops []op) error {
	txn := s.newTxn(s.queue)
	for _, o := range ops {
		for _, k := range added(o) {
			err := txn.Delete(k)
			if errors.Is(err, badger.ErrTxnTooBig) {
				if err = s.commitTxn(s.queue, txn); err == nil {
					txn = s.newTxn(s.queue)
					err = txn.Delete(k)
				}
			}
			if err != nil {
				txn.Discard()
				return err
			}
		}
	}
	if err := s.commitTxn(s.queue, txn); err != nil {
		return err
	}
	if s.qlog == nil {
		return nil
	}
	return s.qlog.sync(false)
}

// applyKept applies ops' writes of phase ph to the kept database (apply)
// and makes them durable (syncKept): a dead letter before the queue
// forgets its message, a dead letter's removal before the round answers.
func (s *Spool) applyKept(ph phase, ops []op) error {
	if len(ops) == 0 {
		return nil
	}
	err := s.apply(s.kept, ph, ops, nil, nil)
	return errors.Join(err, s.syncKept(mayLog(ops)))
}

// mayLog reports whether one of ops' records may have gone to the value
// log: Badger puts a value there from ValueThreshold bytes.
func mayLog(ops []op) bool {
	for _, o := range ops {
		if o.weight() >= ValueThreshold {
			return true
		}
	}
	return false
}

// errBadgerReported fails a commit during which Badger logged an error.
var errBadgerReported = errors.New("badger reported an error during the commit (see the log)")

// newTxn starts a write transaction on db. The queue database is managed:
// only the writer goroutine writes to it, at timestamps it hands out.
func (s *Spool) newTxn(db *badger.DB) *badger.Txn {
	if db == s.queue {
		return db.NewTransactionAt(s.ts, true)
	}
	return db.NewTransaction(true)
}

// commitTxn commits a transaction from newTxn. A queue transaction gets the
// next timestamp, which is never reused even if the commit fails; once it
// is committed, compaction and value-log GC may discard what it deleted or
// overwrote.
func (s *Spool) commitTxn(db *badger.DB, txn *badger.Txn) error {
	if db != s.queue {
		return txn.Commit()
	}
	s.ts++
	if err := txn.CommitAt(s.ts, nil); err != nil {
		return err
	}
	db.SetDiscardTs(s.ts)
	return nil
}

func (s *Spool) seqSnapshot() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq
}

// refusal is the error an op gets when the store refuses it alone: too
// large for Badger (a value over its value-log file size, or a write over
// its transaction limit on its own), or anything else, as ErrStorage.
func refusal(err error) *WriteError {
	if t := err.Error(); errors.Is(err, badger.ErrTxnTooBig) || strings.HasPrefix(t, "Value with size ") || strings.HasPrefix(t, "Key with size ") {
		return &WriteError{Err: ErrTooLarge}
	}
	return &WriteError{Err: ErrStorage}
}

// errText is what the log says of a store error: its first line, at most
// 200 bytes. Badger's errors for a refused write go on with a hex dump of
// the record, which holds a message's URL and headers: stored bytes go to
// no log.
func errText(err error) string {
	t, _, _ := strings.Cut(err.Error(), "\n")
	if len(t) > 200 {
		t = t[:200]
	}
	return t
}

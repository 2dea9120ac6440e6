package spool

import (
	"context"
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
	val := m.encode(make([]byte, 0, 128+len(m.Body)))
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

// Delete removes a delivered message. It does not wait for the write: if
// hookpace crashes first, the message is delivered again (at-least-once).
func (s *Spool) Delete(m *Message) {
	s.submit(&op{kind: opDelete, msg: m, key: queueKey(m.Host, m.ID), old: m.size})
}

// Update persists m's delivery state (attempts, last status and error)
// after a failed attempt, without waiting for the write.
func (s *Spool) Update(m *Message) {
	val := m.encode(make([]byte, 0, 128+len(m.Body)))
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
	if len(s.pending) == 1 {
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

// writeLoop is the only goroutine that writes to Badger. Each round takes
// everything pending, commits it, fsyncs once if any op needs durability,
// and only then tells the waiters.
func (s *Spool) writeLoop() {
	defer close(s.writerDone)
	var batch []*op
	for {
		s.mu.Lock()
		for len(s.pending) == 0 && !s.closed {
			s.cond.Wait()
		}
		if len(s.pending) == 0 && s.closed {
			s.mu.Unlock()
			return
		}
		n := min(len(s.pending), maxBatch)
		batch = append(batch[:0], s.pending[:n]...)
		rest := copy(s.pending, s.pending[n:])
		clear(s.pending[rest:])
		s.pending = s.pending[:rest]
		s.mu.Unlock()
		s.commit(batch)
	}
}

// txnBudget bounds the bytes staged in one Badger transaction, far below
// Badger's own limit (15% of the memtable), so that a transaction is only
// ever cut between ops and two-key ops (bury, revive) stay atomic.
const txnBudget = 1 << 20

func (s *Spool) commit(batch []*op) {
	seq := s.seqSnapshot()
	var (
		written  []*op
		needSync bool
		staged   int
		err      error
	)
	txn := s.db.NewTransaction(true)
	for _, o := range batch {
		if staged > txnBudget {
			if err = txn.Commit(); err != nil {
				break
			}
			txn, staged = s.db.NewTransaction(true), 0
		}
		if err = s.stage(txn, o, &seq); err != nil {
			break
		}
		staged += len(o.val) + len(o.key) + 64
		written = append(written, o)
		needSync = needSync || o.kind == opAppend || o.kind == opRevive
	}
	if err == nil {
		err = txn.Commit()
	} else {
		txn.Discard()
	}
	s.mu.Lock()
	s.seq = max(s.seq, seq) // ids staged in a committed part are never reused
	s.mu.Unlock()
	if err != nil {
		// Report every op of this round as failed. An append that did reach
		// disk in an earlier part is then delivered without having been
		// acknowledged, which at-least-once permits; nothing acknowledged is
		// lost. Usage is recounted from disk at the next start.
		s.log.Error("spool: commit failed", "error", err, "ops", len(batch))
		werr := &WriteError{Err: err}
		for _, o := range batch {
			o.reply(werr)
		}
		s.settle(batch, false)
		return
	}
	var syncErr error
	if needSync {
		if err := s.db.Sync(); err != nil {
			s.log.Error("spool: fsync failed", "error", err)
			syncErr = &WriteError{Err: err}
		}
	}
	s.settle(written, true)
	var appended []*Message
	for _, o := range written {
		if o.kind == opAppend || o.kind == opRevive {
			appended = append(appended, o.msg)
		}
		o.reply(syncErr)
	}
	if len(appended) > 0 {
		// Even when the fsync failed these are committed: deliver them.
		s.opts.OnAppend(appended)
	}
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

// stage adds o's writes to txn.
func (s *Spool) stage(txn *badger.Txn, o *op, seq *uint64) error {
	switch o.kind {
	case opAppend, opRevive:
		id := *seq + 1
		if err := txn.Set(queueKey(o.msg.Host, id), o.val); err != nil {
			return err
		}
		if o.kind == opRevive {
			if err := txn.Delete(deadKey(o.dead)); err != nil {
				return err
			}
		}
		if err := txn.Set(keySeq, be64(id)); err != nil {
			return err
		}
		*seq = id
		o.msg.ID = id
		return nil
	case opDelete:
		return txn.Delete(o.key)
	case opUpdate:
		return txn.Set(o.key, o.val)
	case opBury:
		if err := txn.Delete(o.key); err != nil {
			return err
		}
		return txn.Set(deadKey(o.msg.ID), o.val)
	case opPurge:
		return txn.Delete(deadKey(o.dead))
	}
	return nil
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
		case opDelete:
			s.account(o.msg.Host, -1, -o.old)
			s.drain.add(now, 1)
		case opUpdate:
			s.account(o.msg.Host, 0, o.size-o.old)
		case opBury:
			s.account(o.msg.Host, -1, -o.old)
			s.drain.add(now, 1)
			s.dead++
		case opRevive:
			s.account(o.msg.Host, 1, o.size)
			s.dead--
		case opPurge:
			s.dead--
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
	err := s.db.View(func(txn *badger.Txn) error {
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
	})
	return out, err
}

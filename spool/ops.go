package spool

import (
	"context"
	"sync"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// phase is a step of a group commit (see Spool.commit). A round writes in
// this order, so that every message is durable somewhere at every moment:
// a buried message is in the dead letters before its queue record is
// deleted, and a replayed one is in the queue before its dead letter is
// removed.
type phase uint8

const (
	phaseKeptFirst phase = 1 << iota // the kept database, before the queue (bury)
	phaseQueue                       // the queue database
	phaseKeptAfter                   // the kept database, once the queue write is durable (revive, purge)
)

// op is one change for the writer to make durable. Each kind says, in one
// place, what it writes in each phase of a round and what it changes in
// the ledger once the round is durable.
type op interface {
	base() *opBase
	// phases says in which phases the op writes.
	phases() phase
	// stage adds the op's writes of phase ph to txn. seq is the last id
	// handed out: an op that queues a message takes the next one.
	stage(ph phase, txn *badger.Txn, seq *uint64) error
	// weight is about how many bytes the op stages in a transaction.
	weight() int
	// adds says that the op puts a message into the queue: it is refused
	// while the spool cannot keep it, and announced once it is durable.
	adds() bool
	// shrinks says that the op only removes: it is never refused for
	// space, as it is what frees space.
	shrinks() bool
	// kind names the op for the log.
	kind() string
	// settle records in the ledger that the op is durable.
	settle(l *ledger, now time.Time)
	// release gives back what the op reserved, when it failed.
	release(l *ledger)
}

// opBase is what every op has.
type opBase struct {
	msg  *Message
	done chan error  // nil: nobody waits for the verdict
	then func(error) // nil: none; else called with the verdict, after done
	err  error       // why the op was not applied; nil once it is
}

func (b *opBase) base() *opBase   { return b }
func (b *opBase) adds() bool      { return false }
func (b *opBase) shrinks() bool   { return false }
func (b *opBase) release(*ledger) {}

// hostName is the op's host, for the log.
func (b *opBase) hostName() string {
	if b.msg == nil {
		return ""
	}
	return b.msg.Host
}

// reply tells a waiting submitter the verdict; each op is replied to once.
func (b *opBase) reply() {
	if b.done != nil {
		b.done <- b.err
	}
	if b.then != nil {
		b.then(b.err)
	}
}

// enqueue writes val as m's record at the tail of its lane of its host's
// queue, under the next id.
func enqueue(txn *badger.Txn, m *Message, val []byte, seq *uint64) error {
	id := *seq + 1
	if err := txn.Set(laneKey(m.Host, m.Lane(), id), val); err != nil {
		return err
	}
	*seq = id
	m.ID = id
	return nil
}

// appendOp queues a new message: durable before its caller returns. Its
// room was reserved in the ledger at admission.
// With an idempotency key (once, see dedupe.go) it also records the key,
// in the same transaction, or, repeating an earlier append, writes nothing
// and gives its room back.
type appendOp struct {
	opBase
	val  []byte
	size int64
	once *once // nil: no idempotency key
	coal *coal // nil: no coalesce key (coalesce.go)
}

func (o *appendOp) kind() string { return "append" }
func (o *appendOp) phases() phase {
	if o.once != nil {
		return o.once.phases()
	}
	return phaseQueue
}
func (o *appendOp) adds() bool { return o.once == nil || !o.once.dup() }
func (o *appendOp) weight() int {
	if o.once != nil {
		return len(o.val) + 64 + len(o.once.key) + onceValueLen + 64
	}
	return len(o.val) + 64
}
func (o *appendOp) stage(_ phase, txn *badger.Txn, seq *uint64) error {
	var err error
	if o.coal != nil && o.coal.target != 0 {
		err = o.stageReplace(txn, seq)
	} else {
		err = enqueue(txn, o.msg, o.val, seq)
	}
	if err != nil || o.once == nil || !o.once.record {
		return err
	}
	return txn.Set(o.once.key, o.once.value(o.msg.ID))
}
func (o *appendOp) settle(l *ledger, _ time.Time) {
	if o.once != nil {
		l.settleOnce(o)
		if o.once.dup() {
			return
		}
	}
	l.written += o.size
	if o.coal == nil || o.coal.target == 0 {
		l.laned(o.msg.Host, o.msg.Lane(), 1) // a replacement adds no message
	}
}
func (o *appendOp) release(l *ledger) { l.release(o.msg.Host, o.size) }

// deleteOp removes a delivered message.
type deleteOp struct {
	opBase
	old int64  // the record's stored size
	to  string // handed off to this hookpace (its id there), for the journal
}

func (o *deleteOp) kind() string  { return "delete" }
func (o *deleteOp) shrinks() bool { return true }
func (o *deleteOp) phases() phase { return phaseQueue }
func (o *deleteOp) weight() int   { return len(o.msg.Host) + 10 + 64 }
func (o *deleteOp) stage(_ phase, txn *badger.Txn, _ *uint64) error {
	return txn.Delete(o.msg.key())
}
func (o *deleteOp) settle(l *ledger, now time.Time) {
	l.left(o.msg.Host, o.old, now)
	l.laned(o.msg.Host, o.msg.Lane(), -1)
}

// updateOp rewrites a message's delivery state after a failed attempt.
type updateOp struct {
	opBase
	val       []byte
	size, old int64 // stored size after and before
}

func (o *updateOp) kind() string  { return "update" }
func (o *updateOp) phases() phase { return phaseQueue }
func (o *updateOp) weight() int   { return len(o.val) + len(o.msg.Host) + 10 + 64 }
func (o *updateOp) stage(_ phase, txn *badger.Txn, _ *uint64) error {
	return txn.Set(o.msg.key(), o.val)
}
func (o *updateOp) settle(l *ledger, _ time.Time) {
	l.add(o.msg.Host, 0, o.size-o.old)
	l.written += o.size
}

// buryOp moves a message that failed for good to the dead letters: the
// dead letter first, then the queue record's removal. If the dead letter
// cannot be written, the message stays queued.
type buryOp struct {
	opBase
	val    []byte // the dead letter
	old    int64  // the queue record's stored size
	reason string // for the journal
}

func (o *buryOp) kind() string  { return "bury" }
func (o *buryOp) phases() phase { return phaseKeptFirst | phaseQueue }
func (o *buryOp) weight() int   { return len(o.val) + len(o.msg.Host) + 10 + 64 }
func (o *buryOp) stage(ph phase, txn *badger.Txn, _ *uint64) error {
	if ph == phaseKeptFirst {
		return txn.Set(deadKey(o.msg.ID), o.val)
	}
	return txn.Delete(o.msg.key())
}
func (o *buryOp) settle(l *ledger, now time.Time) {
	l.left(o.msg.Host, o.old, now)
	l.laned(o.msg.Host, o.msg.Lane(), -1)
	l.buried(o.msg.Host, 1)
}

// reviveOp moves a dead letter back to the tail of its host's queue, under
// a new id, then removes the dead letter. A dead letter that cannot be
// removed leaves the message in both places: replayed twice, never lost.
type reviveOp struct {
	opBase
	val  []byte
	size int64
	dead uint64 // the dead letter's id
}

func (o *reviveOp) kind() string  { return "revive" }
func (o *reviveOp) phases() phase { return phaseQueue | phaseKeptAfter }
func (o *reviveOp) adds() bool    { return true }
func (o *reviveOp) weight() int   { return len(o.val) + 64 }
func (o *reviveOp) stage(ph phase, txn *badger.Txn, seq *uint64) error {
	if ph == phaseKeptAfter {
		return txn.Delete(deadKey(o.dead))
	}
	return enqueue(txn, o.msg, o.val, seq)
}
func (o *reviveOp) settle(l *ledger, _ time.Time) {
	l.add(o.msg.Host, 1, o.size)
	l.laned(o.msg.Host, o.msg.Lane(), 1)
	l.written += o.size
	l.buried(o.msg.Host, -1)
}

// purgeOp removes a dead letter for good.
type purgeOp struct {
	opBase
	dead uint64
	host string // the dead letter's
}

func (o *purgeOp) kind() string  { return "purge" }
func (o *purgeOp) shrinks() bool { return true }
func (o *purgeOp) phases() phase { return phaseKeptAfter }
func (o *purgeOp) weight() int   { return 9 + 64 }
func (o *purgeOp) stage(_ phase, txn *badger.Txn, _ *uint64) error {
	return txn.Delete(deadKey(o.dead))
}
func (o *purgeOp) settle(l *ledger, _ time.Time) { l.buried(o.host, -1) }

// Append makes m durable and assigns its ID. It returns only once the write
// is fsync'd, so the caller may acknowledge the webhook. hostLimit is the
// host's max_queued (0 for none). A *FullError means backpressure; a
// *WriteError means the write did not happen durably.
func (s *Spool) Append(ctx context.Context, m *Message, hostLimit int64) error {
	return s.append(m, hostLimit, nil, nil)
}

func (s *Spool) append(m *Message, hostLimit int64, on *once, co *coal) error {
	m.Spool = s.instance
	if m.OriginSpool == s.instance {
		// An origin on this very spool is no hand-off (one comes from
		// another spool): the claim is dropped and m gets its own id, so
		// that no client can give its webhook an id this spool hands out.
		m.Origin, m.OriginSpool = 0, 0
	}
	if err := checkFairness(m.Fairness); err != nil {
		return err
	}
	val := m.record()
	if len(val) > MaxRecordSize {
		return &WriteError{Err: ErrTooLarge}
	}
	o := &appendOp{opBase: opBase{msg: m, done: make(chan error, 1)}, val: val, size: m.storedSize(val), once: on, coal: co}
	if err := s.admit(m.Host, o.size, hostLimit); err != nil {
		return err
	}
	return s.submitAppend(o, m)
}

// submitAppend submits o, the append of m whose size the ledger has
// reserved, and waits for its verdict; a refused submit gives the
// reservation back.
func (s *Spool) submitAppend(o *appendOp, m *Message) error {
	done := o.done // the writer owns o once it is submitted
	// Set before: the dispatcher may hold m (announced) before this
	// goroutine hears the verdict.
	m.size = o.size
	if err := s.submit(o); err != nil {
		s.mu.Lock()
		s.ledger.release(m.Host, o.size)
		s.mu.Unlock()
		return err
	}
	// The wait ignores ctx: once submitted, the write happens regardless, and
	// its outcome must be known before answering.
	return <-done
}

// admit asks the ledger to admit a message (see ledger.admit).
func (s *Spool) admit(host string, size, hostLimit int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return s.ledger.admit(host, size, hostLimit, time.Now())
}

// Delete removes a delivered message and returns once the removal is
// durable. Until then a crash would deliver the message again
// (at-least-once).
func (s *Spool) Delete(m *Message) error {
	return s.submitWait(&deleteOp{opBase: opBase{msg: m}, old: m.size})
}

// DeleteThen removes delivered ms (a webhook, or a batch's members) like
// DeleteAll, without waiting: done is called once every removal is
// settled, durable or failed, with the first error. It is called on the
// spool's writer goroutine (or on the caller's, if the spool is closed),
// so it must neither block nor call the spool. The removals end the
// writer's linger like a waited-for op: they are durable in the next
// round.
func (s *Spool) DeleteThen(ms []*Message, done func(error)) {
	if len(ms) == 0 {
		done(nil)
		return
	}
	g := &deleteGroup{left: len(ms), done: done}
	for i, m := range ms {
		// done is buffered and never read: it makes the writer count the
		// op as waited for.
		o := &deleteOp{opBase: opBase{msg: m, done: make(chan error, 1), then: g.settled}, old: m.size}
		if err := s.submit(o); err != nil {
			for range ms[i:] {
				g.settled(err)
			}
			return
		}
	}
}

// deleteGroup is the removals of one DeleteThen: done is called when the
// last is settled.
type deleteGroup struct {
	mu   sync.Mutex
	left int
	err  error // the first
	done func(error)
}

func (g *deleteGroup) settled(err error) {
	g.mu.Lock()
	if g.err == nil {
		g.err = err
	}
	g.left--
	last := g.left == 0
	g.mu.Unlock()
	if last {
		g.done(g.err)
	}
}

// DeleteAll is Delete for the members of a batch delivered in one request:
// their removals are submitted together, so that one commit (one fsync)
// usually makes them all durable. It returns once every removal is
// settled, with the first error.
func (s *Spool) DeleteAll(ms []*Message) error {
	dones := make([]chan error, 0, len(ms))
	var first error
	for _, m := range ms {
		done := make(chan error, 1)
		if err := s.submit(&deleteOp{opBase: opBase{msg: m, done: done}, old: m.size}); err != nil {
			first = err
			break
		}
		dones = append(dones, done)
	}
	for _, done := range dones {
		if err := <-done; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Update persists m's delivery state (attempts, last status and error)
// after a failed attempt, without waiting for the write.
func (s *Spool) Update(m *Message) {
	m.LastError = clip(m.LastError)
	val := m.record()
	o := &updateOp{opBase: opBase{msg: m}, val: val, size: m.storedSize(val), old: m.size}
	m.size = o.size
	s.submit(o)
}

// Bury moves m to the dead letters with the reason it failed for good,
// without waiting for the write.
func (s *Spool) Bury(m *Message, reason string, at time.Time) {
	m.LastError = clip(m.LastError)
	d := &Dead{Message: m, Reason: clip(reason), DiedAt: at}
	s.submit(&buryOp{opBase: opBase{msg: m}, val: d.encode(), old: m.size, reason: d.Reason})
}

// maxReason bounds the error texts stored with a message (its last error,
// a dead letter's reason), so that a record grows by at most a few KiB
// after it was admitted (see MaxRecordSize).
const maxReason = 4 << 10

func clip(s string) string {
	if len(s) > maxReason {
		return s[:maxReason]
	}
	return s
}

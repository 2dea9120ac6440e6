package spool

import (
	"context"
	"math"
	"strconv"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// Coalescing. An append with a coalesce key C for host H, when
// the last webhook appended with (H, C) is still queued and not in flight,
// replaces that webhook's method, URL, headers and body in place: it keeps
// its id, its position, its arrival time and its delivery state. The
// replacement is written by the writer like any append, durable before the
// caller returns. Otherwise (none, delivered, dead-lettered or in flight)
// the webhook is queued normally and becomes the one the key names.
// A replacement keeps the lane (lane.go) of the webhook it replaces, and
// its not-before time: the update's own lane fields are not used.
//
// In flight is what the dispatcher says: it calls Begin before an attempt
// and End after it. The writer decides under the spool's mutex: a message
// in flight is not replaced, and Begin waits while a replacement of its
// message is being written, then hands the dispatcher the new content, so
// the body delivered is always the last one accepted.
//
// The key, how often the webhook's content was replaced and when last are
// in its record (Message.Coal).
//
// Which message a key names is kept in memory (coal.index), checked
// against the queue on every use: after a restart the next update of a key
// is queued anew, and coalescing goes on from there.

// Keys are the optional keys of an append.
type Keys struct {
	Idempotency string        // "" or dedupe off: none
	Window      time.Duration // how long Idempotency is remembered
	Coalesce    string        // "": none
	// Scope is who the keys belong to (the authenticated proxy user; ""
	// without proxy auth): a key names only webhooks appended with the
	// same scope, so one tenant's key never reaches another's webhook.
	Scope string
}

// Appended says what an append with Keys did.
type Appended uint8

const (
	Stored    Appended = iota // queued as a new webhook
	Duplicate                 // repeated an earlier idempotency key: m.ID is the earlier id
	Coalesced                 // replaced a queued webhook: m.ID is its id
	// Conflict: the idempotency key was first used, within its window,
	// for another request (method, URL or body): nothing is stored, and
	// m.ID is the first one's id.
	Conflict
)

// maxCoalesceIndex bounds the keys held in memory; beyond it the index is
// cleared (the next update of each key is queued anew).
const maxCoalesceIndex = 100_000

// coalState is the coalescing state, guarded by the spool's mutex.
type coalState struct {
	index     map[string]coalRef  // coalesce key (coalKey) -> the message it names
	inflight  map[uint64]int      // ids the dispatcher is sending
	replacing map[uint64]bool     // ids whose replacement is being written
	replaced  map[uint64]*Message // new content for the dispatcher, by id
	count     map[string]int64    // coalesced webhooks by host, since open
	done      chan struct{}       // closed and renewed when replacements finish
}

// coalKey is where the index keeps a coalesce key of scope for host. The
// scope's length comes first, so that no scope and key pair can spell
// another's.
func coalKey(host, scope, key string) string {
	return host + "\x00" + strconv.Itoa(len(scope)) + ":" + scope + key
}

// coalRef is the message a coalesce key names: its id and its lane, where
// its record is. A replacement stays in the lane of the message it
// replaces, whatever lane the update asked for: it keeps its place.
type coalRef struct {
	id   uint64
	lane Lane
}

// coal is an append's coalesce key and what the writer decided for it.
type coal struct {
	key     string // in the index (coalKey)
	name    string // as the app gave it, for the journal
	target  uint64 // set: replace this message
	lane    Lane   // the target's lane
	marked  uint64 // the target as resolved, marked replacing until settled
	old     int64  // the replaced record's stored size (set at stage)
	newVal  []byte // the replacement record (set at stage)
	newSize int64  // its stored size
}

// AppendKeys is Append with an idempotency key and a coalesce key, either
// of which may be empty.
func (s *Spool) AppendKeys(ctx context.Context, m *Message, hostLimit int64, k Keys) (Appended, error) {
	m.Spool = s.instance // a duplicate answers with the first one's id, of this spool
	var on *once
	if k.Idempotency != "" && k.Window > 0 {
		if len(k.Idempotency) > MaxIdempotencyKey {
			return Stored, errKeyTooLong
		}
		on = &once{key: scopedOnceKey(m.Host, k.Scope, k.Idempotency), expires: s.now().Add(k.Window), fp: fingerprint(m)}
		if id, fp, ok := s.lookupScopedOnce(on, m.Host, k); ok {
			m.ID = id
			if fp != 0 && fp != on.fp {
				return Conflict, nil
			}
			s.countDup(m.Host)
			return Duplicate, nil
		}
	}
	var co *coal
	if k.Coalesce != "" {
		co = &coal{key: coalKey(m.Host, k.Scope, k.Coalesce), name: k.Coalesce}
		if m.Coal == nil || m.Coal.Key != k.Coalesce {
			m.Coal = &Coalescing{Key: k.Coalesce} // in its record: the journal reads it there
		}
	}
	err := s.append(m, hostLimit, on, co)
	switch {
	case err != nil:
		return Stored, err
	case on != nil && on.dup() && on.conflict():
		return Conflict, nil
	case on != nil && on.dup():
		return Duplicate, nil
	case co != nil && co.target != 0:
		return Coalesced, nil
	}
	return Stored, nil
}

// resolveCoalesce decides, on the writer goroutine before a round is
// staged, which appends of batch replace a queued message.
func (s *Spool) resolveCoalesce(batch []op) {
	var q *badger.Txn
	seen := map[uint64]bool{} // one replacement per message and round
	for _, o := range batch {
		a, ok := o.(*appendOp)
		if !ok || a.coal == nil || a.err != nil || (a.once != nil && a.once.dup()) {
			continue
		}
		s.mu.Lock()
		ref := s.coal.index[a.coal.key]
		id := ref.id
		s.mu.Unlock()
		if id == 0 || seen[id] {
			continue
		}
		if q == nil {
			q = s.queue.NewTransactionAt(math.MaxUint64, false)
			defer q.Discard()
		}
		if _, err := q.Get(laneKey(a.msg.Host, ref.lane, id)); err != nil {
			continue // delivered or dead-lettered: queue anew
		}
		s.mu.Lock()
		if s.coal.inflight[id] == 0 {
			a.coal.target, a.coal.marked, a.coal.lane = id, id, ref.lane
			s.coal.replacing[id] = true
			seen[id] = true
		}
		s.mu.Unlock()
	}
}

// stageReplace writes a's content over its target's record, keeping the
// target's arrival time and delivery state. A target gone meanwhile (it
// cannot be: it is not in flight, so not deleted) queues a anew.
func (a *appendOp) stageReplace(txn *badger.Txn, seq *uint64) error {
	co := a.coal
	item, err := txn.Get(laneKey(a.msg.Host, co.lane, co.target))
	if err != nil {
		co.target = 0
		return enqueue(txn, a.msg, a.val, seq)
	}
	var old *Message
	err = item.Value(func(v []byte) error {
		old, err = decodeMessage(a.msg.Host, co.target, v)
		if err == nil {
			co.old = old.storedSize(v)
		}
		return err
	})
	if err != nil {
		return err
	}
	m := a.msg
	old.Method, old.URL, old.Header, old.Body = m.Method, m.URL, m.Header, m.Body
	c := Coalescing{Key: m.Coal.Key} // for a record from before records kept the key
	if old.Coal != nil {
		c = *old.Coal
	}
	c.Replaced++
	c.At = m.Enqueued
	old.Coal = &c
	co.newVal = old.record()
	co.newSize = old.storedSize(co.newVal)
	if err := txn.Set(old.key(), co.newVal); err != nil {
		return err
	}
	m.ID = co.target
	// m takes the target's lane fields, with its place: what the
	// dispatcher is told of (announce) is where the record is.
	m.Fairness, m.Priority, m.Ordering, m.NotBefore = old.Fairness, old.Priority, old.Ordering, old.NotBefore
	m.Coal = old.Coal
	return nil
}

// settleCoalesces completes a round's appends with a coalesce key, under
// the spool's mutex, and wakes the Begin calls that waited for them.
func (s *Spool) settleCoalesces(batch []op) {
	any := false
	for _, o := range batch {
		if a, ok := o.(*appendOp); ok && a.coal != nil && (a.once == nil || !a.once.dup()) {
			s.settleCoalesce(s.ledger, a)
			any = true
		}
	}
	if any {
		s.wakeBeginLocked()
	}
}

// settleCoalesce completes an append with a coalesce key: the key names
// the message, and a replacement hands its content to the dispatcher and
// gives back the room a new message took.
func (s *Spool) settleCoalesce(l *ledger, a *appendOp) {
	co := a.coal
	st := &s.coal
	if a.err == nil {
		if len(st.index) >= maxCoalesceIndex {
			clear(st.index)
		}
		ref := coalRef{id: a.msg.ID, lane: a.msg.Lane()}
		if co.target != 0 {
			ref.lane = co.lane
		}
		st.index[co.key] = ref
	}
	if co.marked != 0 {
		delete(st.replacing, co.marked)
	}
	if co.target == 0 {
		return
	}
	if a.err != nil || co.newVal == nil {
		co.target = 0
		return
	}
	size := co.newSize
	l.release(a.msg.Host, a.size)
	l.add(a.msg.Host, 0, size-co.old)
	r := *a.msg
	r.size = size
	st.replaced[co.target] = &r
	st.count[a.msg.Host]++
}

// wakeBegin wakes the Begin calls waiting for replacements; mutex held.
func (s *Spool) wakeBeginLocked() {
	close(s.coal.done)
	s.coal.done = make(chan struct{})
}

// Begin tells the spool that the dispatcher is about to send m: m is not
// replaced until End. If m was replaced since the dispatcher read it, m
// takes the new method, URL, headers and body, and the difference in its
// body's length is returned (for the dispatcher's memory accounting).
func (s *Spool) Begin(m *Message) (grew int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.coal.replacing[m.ID] {
		done := s.coal.done
		s.mu.Unlock()
		<-done
		s.mu.Lock()
	}
	s.coal.inflight[m.ID]++
	if r := s.coal.replaced[m.ID]; r != nil {
		delete(s.coal.replaced, m.ID)
		grew = int64(len(r.Body) - len(m.Body))
		m.Method, m.URL, m.Header, m.Body, m.size = r.Method, r.URL, r.Header, r.Body, r.size
		m.Coal = r.Coal
	}
	return grew
}

// End tells the spool that the attempt Begin announced is over, and that
// its outcome (delete, update or burial) has been submitted.
func (s *Spool) End(m *Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.coal.inflight[m.ID]--; s.coal.inflight[m.ID] <= 0 {
		delete(s.coal.inflight, m.ID)
	}
}

// HostCoalesced returns how many webhooks for host replaced a queued one
// since the spool opened.
func (s *Spool) HostCoalesced(host string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.coal.count[host]
}

func (c *coalState) init() {
	c.index = make(map[string]coalRef)
	c.inflight = make(map[uint64]int)
	c.replacing = make(map[uint64]bool)
	c.replaced = make(map[uint64]*Message)
	c.count = make(map[string]int64)
	c.done = make(chan struct{})
}

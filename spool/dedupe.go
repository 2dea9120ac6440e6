package spool

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/internal/record"
)

// Idempotency keys. A webhook appended with a key is
// remembered for its host's dedupe window:
//
//	queue/  k <host> 0x00 <key>   → <id:8 bytes big-endian> <expires: unix ns, 8 bytes>
//	                                 [<fingerprint of method, URL and body: 8 bytes>]
//	dead/   the same, once the queue database was dropped (moveOnce)
//
// A later append with the same host and key, before the record expires,
// stores nothing and is answered with the first one's id, whether that one
// is still queued, delivered or dead-lettered; if its method, URL or body
// differ from the first one's (the fingerprint; records written before it
// have none), it is a Conflict instead (422 at the proxy, as the IETF
// Idempotency-Key draft answers a key reused for another request).
//
// The check and the insert happen on the writer goroutine, once per round
// (resolveOnce), so concurrent appends of one key store one message: within
// a round the first op of a key is the primary and the others follow it;
// across rounds the databases are current, since only the writer writes.
// The record is written in the same transaction as its message, so one
// fsync makes both durable before the 202. The queue database is dropped
// whole when it is empty (reclaim): the records still in it are first
// copied to the kept database, which keeps them until they expire.

const prefixOnce = 'k'

// Defaults for Options.DedupeMaxKeys and DedupeMaxBytes.
const (
	defaultDedupeMaxKeys  = 1_000_000
	defaultDedupeMaxBytes = 256 << 20
)

// MaxIdempotencyKey is the longest key the spool remembers.
const MaxIdempotencyKey = 255

var errKeyTooLong = errors.New("idempotency key too long")

// onceValueLen is the length of a key record's value; onceValueLenV1 of
// one written before records kept a fingerprint.
const (
	onceValueLen   = 24
	onceValueLenV1 = 16
)

// fingerprint identifies a webhook's request, for telling a repeat from a
// key reused for another request.
func fingerprint(m *Message) uint64 {
	h := sha256.New()
	for _, s := range []string{m.Method, m.URL} {
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	h.Write(m.Body)
	return record.BeUint64(h.Sum(nil))
}

// onceKey is the record of key for host without a scope (no proxy auth),
// as every record was kept before keys had scopes.
func onceKey(host, key string) []byte {
	k := make([]byte, 0, len(host)+len(key)+2)
	k = append(k, prefixOnce)
	k = append(k, host...)
	k = append(k, 0)
	return append(k, key...)
}

// scopedOnceKey is the record of key for host within scope:
//
//	k <host> 0x00 0x01 <scope> 0x00 <key>
//
// A header value cannot hold 0x01 (a control character), so no unscoped
// key (onceKey) spells a scoped one, and scope "" is onceKey's layout.
func scopedOnceKey(host, scope, key string) []byte {
	if scope == "" {
		return onceKey(host, key)
	}
	k := make([]byte, 0, len(host)+len(scope)+len(key)+4)
	k = append(k, prefixOnce)
	k = append(k, host...)
	k = append(k, 0, 1)
	k = append(k, scope...)
	k = append(k, 0)
	return append(k, key...)
}

// lookupScopedOnce finds on's record; for a scoped key without one, a
// record written before keys had scopes (onceKey) counts only for the very
// same request (its fingerprint): a retry across an upgrade is still a
// duplicate, while another tenant's different request under that key is
// neither answered with its id nor refused for it.
func (s *Spool) lookupScopedOnce(on *once, host string, k Keys) (id, fp uint64, ok bool) {
	if id, fp, ok = s.lookupOnce(on.key); ok || k.Scope == "" {
		return id, fp, ok
	}
	id, fp, ok = s.lookupOnce(onceKey(host, k.Idempotency))
	if !ok || fp == 0 || fp != on.fp {
		return 0, 0, false
	}
	return id, fp, true
}

// once is an append's idempotency key, and what the writer found for it.
type once struct {
	key     []byte // the record's key in the kept database
	expires time.Time
	primary *appendOp // set: an earlier op of this round has the same key
	found   bool      // the kept database has an unexpired record
	id      uint64    // its id
	record  bool      // write the record once the message is durable
	renew   bool      // the record replaces an expired one: counted already
	fp      uint64    // this append's fingerprint (0: none taken)
	foundFP uint64    // the found record's fingerprint (0: it has none)
}

// conflict reports whether a repeat's key was first used for another
// request.
func (o *once) conflict() bool {
	switch {
	case o.fp == 0:
		return false
	case o.primary != nil:
		return o.primary.once.fp != 0 && o.primary.once.fp != o.fp
	case o.found:
		return o.foundFP != 0 && o.foundFP != o.fp
	}
	return false
}

// dup reports whether the append repeats an earlier one: it stores nothing.
func (o *once) dup() bool { return o.primary != nil || o.found }

func (o *once) phases() phase {
	switch {
	case o.dup():
		return 0
	}
	return phaseQueue
}

func (o *once) value(id uint64) []byte {
	v := make([]byte, 0, onceValueLen)
	v = binary.BigEndian.AppendUint64(v, id)
	v = binary.BigEndian.AppendUint64(v, uint64(o.expires.UnixNano()))
	return binary.BigEndian.AppendUint64(v, o.fp)
}

func (o *once) size() int64 { return int64(len(o.key)) + onceValueLen }

func parseOnce(v []byte) (id uint64, expires time.Time, ok bool) {
	if len(v) != onceValueLen && len(v) != onceValueLenV1 {
		return 0, time.Time{}, false
	}
	return record.BeUint64(v), time.Unix(0, int64(record.BeUint64(v[8:]))), true
}

// onceFP is a record's fingerprint, 0 for a record without one.
func onceFP(v []byte) uint64 {
	if len(v) != onceValueLen {
		return 0
	}
	return record.BeUint64(v[16:])
}

// onceStats is the dedupe accounting, guarded by the spool's mutex.
type onceStats struct {
	keys, bytes int64
	deduped     map[string]int64 // by host, since the spool opened
	fullLogged  bool
}

// AppendOnce is Append for a webhook with an idempotency key: when host
// and key were appended within window, nothing is stored, m.ID is set to
// the first one's id, and dup is true. A window of 0, or an empty key,
// remembers nothing.
func (s *Spool) AppendOnce(ctx context.Context, m *Message, hostLimit int64, key string, window time.Duration) (dup bool, err error) {
	if key == "" || window <= 0 {
		return false, s.Append(ctx, m, hostLimit)
	}
	if len(key) > MaxIdempotencyKey {
		return false, errKeyTooLong
	}
	m.Spool = s.instance // a duplicate answers with the first one's id, of this spool
	on := &once{key: onceKey(m.Host, key), expires: s.now().Add(window)}
	if id, _, ok := s.lookupOnce(on.key); ok {
		// Already durable: no need to take room or a round.
		m.ID = id
		s.countDup(m.Host)
		return true, nil
	}
	err = s.append(m, hostLimit, on, nil)
	return err == nil && on.dup(), err
}

// lookupOnce reads key's record and its fingerprint; ok if it has not
// expired.
// A record of an id not yet shown (see Spool.shown) is not found: its
// webhook's round may still be refused.
func (s *Spool) lookupOnce(key []byte) (id, fp uint64, ok bool) {
	shown := s.shown.Load()
	q := s.queue.NewTransactionAt(math.MaxUint64, false)
	defer q.Discard()
	k := s.kept.NewTransaction(false)
	defer k.Discard()
	id, exp, fp, ok := getOnceIn(q, k, key)
	return id, fp, ok && id <= shown && s.now().Before(exp)
}

// getOnceIn reads key's record from the queue database, else the kept one.
func getOnceIn(queue, kept *badger.Txn, key []byte) (id uint64, expires time.Time, fp uint64, ok bool) {
	if id, expires, fp, ok = getOnceFP(queue, key); ok {
		return id, expires, fp, ok
	}
	return getOnceFP(kept, key)
}

func getOnce(txn *badger.Txn, key []byte) (id uint64, expires time.Time, ok bool) {
	id, expires, _, ok = getOnceFP(txn, key)
	return id, expires, ok
}

func getOnceFP(txn *badger.Txn, key []byte) (id uint64, expires time.Time, fp uint64, ok bool) {
	item, err := txn.Get(key)
	if err != nil {
		return 0, time.Time{}, 0, false
	}
	_ = item.Value(func(v []byte) error {
		id, expires, ok = parseOnce(v)
		fp = onceFP(v)
		return nil
	})
	return id, expires, fp, ok
}

// resolveOnce decides, on the writer goroutine before a round is staged,
// which appends of batch repeat an earlier one.
func (s *Spool) resolveOnce(batch []op) {
	var first map[string]*appendOp
	var q, k *badger.Txn
	now := s.now()
	s.mu.Lock()
	room := s.keyRoomLocked()
	s.mu.Unlock()
	for _, o := range batch {
		a, ok := o.(*appendOp)
		if !ok || a.once == nil || a.err != nil {
			continue
		}
		on := a.once
		if p := first[string(on.key)]; p != nil {
			on.primary = p
			continue
		}
		if q == nil {
			q, k = s.queue.NewTransactionAt(math.MaxUint64, false), s.kept.NewTransaction(false)
			defer q.Discard()
			defer k.Discard()
		}
		id, exp, fp, found := getOnceIn(q, k, on.key)
		if found && now.Before(exp) {
			on.found, on.id, on.foundFP = true, id, fp
			continue
		}
		if first == nil {
			first = make(map[string]*appendOp)
		}
		first[string(on.key)] = a
		on.renew = found
		on.record = found || room > 0
		if !found && room > 0 {
			room--
		} else if !on.record {
			s.logKeysFull()
		}
	}
}

// keyRoomLocked is how many more keys may be remembered.
func (s *Spool) keyRoomLocked() int64 {
	st := &s.ledger.once
	if st.bytes >= s.opts.DedupeMaxBytes {
		return 0
	}
	return max(0, s.opts.DedupeMaxKeys-st.keys)
}

func (s *Spool) logKeysFull() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ledger.once.fullLogged {
		s.ledger.once.fullLogged = true
		s.log.Warn("spool: dedupe keys at dedupe.max_keys or dedupe.max_bytes; new keys are not remembered until old ones expire",
			"keys", s.ledger.once.keys, "bytes", s.ledger.once.bytes)
	}
}

// settleOnce completes a keyed append once its round is durable: a repeat
// gives back its room and counts as deduplicated; a new key is counted.
// The repeat's id is set by followPrimaries.
func (l *ledger) settleOnce(o *appendOp) {
	on := o.once
	switch {
	case on.dup():
		l.release(o.msg.Host, o.size)
		if !on.conflict() {
			l.countDup(o.msg.Host)
		}
	case on.record:
		l.written += on.size()
		if !on.renew {
			l.once.keys++
			l.once.bytes += on.size()
		}
	}
}

// followPrimaries gives every repeat in batch its primary's id and
// verdict, or the id found in the kept database.
func followPrimaries(batch []op) {
	for _, o := range batch {
		a, ok := o.(*appendOp)
		if !ok || a.once == nil {
			continue
		}
		switch on := a.once; {
		case on.primary != nil:
			a.msg.ID, a.err = on.primary.msg.ID, on.primary.err
		case on.found:
			a.msg.ID = on.id
		}
	}
}

func (s *Spool) countDup(host string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ledger.countDup(host)
}

func (l *ledger) countDup(host string) {
	if l.once.deduped == nil {
		l.once.deduped = make(map[string]int64)
	}
	l.once.deduped[host]++
}

// Deduped returns, by host, how many webhooks were answered with an
// earlier one's id since the spool opened.
func (s *Spool) Deduped() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int64, len(s.ledger.once.deduped))
	for h, n := range s.ledger.once.deduped {
		out[h] = n
	}
	return out
}

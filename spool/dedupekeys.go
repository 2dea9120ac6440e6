package spool

import (
	"math"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// Remembered idempotency keys across restarts: loaded at Open (and moved
// from an older layout), and swept once expired.

// loadOnce counts the remembered keys when the spool opens.
func (s *Spool) loadOnce() error {
	s.ledger.once = onceStats{}
	count := func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixOnce}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			s.ledger.once.keys++
			s.ledger.once.bytes += int64(len(it.Item().Key())) + it.Item().ValueSize()
			// A remembered id is never handed out again, even when its
			// message was delivered and the id sequence was not saved
			// (kill -9): a repeat would be answered with another
			// webhook's id.
			if err := it.Item().Value(func(v []byte) error {
				if id, _, ok := parseOnce(v); ok {
					s.seq = max(s.seq, id)
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	}
	if err := s.kept.View(count); err != nil {
		return err
	}
	return s.queue.View(count)
}

// moveOnce copies the key records of the queue database to the kept one,
// before the queue database is dropped (reclaim). Expired ones are left
// behind.
func (s *Spool) moveOnce() error {
	now := s.now()
	txn := s.queue.NewTransactionAt(math.MaxUint64, false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixOnce}, PrefetchValues: true, PrefetchSize: 256})
	defer it.Close()
	wb := s.kept.NewWriteBatch()
	defer wb.Cancel()
	moved, vlog := 0, false
	for it.Rewind(); it.Valid(); it.Next() {
		v, err := it.Item().ValueCopy(nil)
		if err != nil {
			return err
		}
		if _, exp, ok := parseOnce(v); !ok || !now.Before(exp) {
			continue
		}
		if err := wb.Set(it.Item().KeyCopy(nil), v); err != nil {
			return err
		}
		moved++
		vlog = vlog || len(v) >= ValueThreshold
	}
	if moved == 0 {
		return nil
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	return s.syncKept(vlog)
}

// sweepOnce removes up to sweepMax expired key records; it returns how
// many it removed. gcLoop calls it; tests call it with their clock.
func (s *Spool) sweepOnce() (int, error) {
	now := s.now()
	keys, err := s.onceKeys(sweepMax, func(_ uint64, exp time.Time, ok bool) bool { return !ok || !now.Before(exp) })
	if err != nil {
		return 0, err
	}
	return s.removeKeys(keys, now, nil)
}

const sweepMax = 10_000

// ForgetKeys removes, durably, the key records that name ms (by id) from
// both databases, and returns how many it removed: a repeat of one of
// those keys is then stored anew. Replication calls it for the webhooks
// it drops at a start as delivered by an adopter: one of them may be of a
// round whose publish was in flight when this node stopped, which the
// stream never took and no client had a 202 for; its key, kept, would
// answer the client's retry with the id of a webhook no one delivers.
func (s *Spool) ForgetKeys(ms []*Message) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	ids := make(map[uint64]bool, len(ms))
	for _, m := range ms {
		ids[m.ID] = true
	}
	keys, err := s.onceKeys(0, func(id uint64, _ time.Time, ok bool) bool { return ok && ids[id] })
	if err != nil {
		return 0, err
	}
	return s.removeKeys(keys, s.now(), ids)
}

// onceKeys returns the key records, of the queue database then the kept
// one, that want picks by their id and expiry (ok false: unreadable), up
// to max of them (0: all).
func (s *Spool) onceKeys(max int, want func(id uint64, exp time.Time, ok bool) bool) ([][]byte, error) {
	var keys [][]byte
	scan := func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixOnce}, PrefetchValues: true, PrefetchSize: 256})
		defer it.Close()
		for it.Rewind(); it.Valid() && (max == 0 || len(keys) < max); it.Next() {
			var id uint64
			var exp time.Time
			ok := false
			_ = it.Item().Value(func(v []byte) error { id, exp, ok = parseOnce(v); return nil }) // unread: not ok
			if want(id, exp, ok) {
				keys = append(keys, it.Item().KeyCopy(nil))
			}
		}
		return nil
	}
	q := s.queue.NewTransactionAt(math.MaxUint64, false)
	err := scan(q)
	q.Discard()
	if err == nil {
		err = s.kept.View(scan)
	}
	return keys, err
}

// removeKeys removes the key records keys that have expired by now, or
// name one of ids, in ops of at most keysPerOp; it returns how many it
// removed.
func (s *Spool) removeKeys(keys [][]byte, now time.Time, ids map[uint64]bool) (int, error) {
	n := 0
	for len(keys) > 0 {
		part := keys[:min(len(keys), keysPerOp)]
		keys = keys[len(part):]
		o := &sweepOp{keys: part, now: now, ids: ids}
		if err := s.submitWait(o); err != nil {
			return n, err
		}
		n += o.removed[0] + o.removed[1]
	}
	return n, nil
}

// keysPerOp is the most key records one op removes: all of an op's
// deletes must fit in one transaction of Badger's, whose limits at the
// 4 MiB memtables are 629 KB and about 6,500 entries. A key record's key
// holds a host, a scope (a configured user or route name) and a key of at
// most MaxIdempotencyKey bytes: under 1 KB, so 256 fit with room to spare.
const keysPerOp = 256

// sweepOp removes expired key records from both databases, each checked
// again as it is staged: a key renewed since the scan is kept. With ids,
// it also removes the unexpired records that name one of ids.
type sweepOp struct {
	opBase
	keys    [][]byte
	now     time.Time
	ids     map[uint64]bool
	removed [2]int // by phase: queue, kept
	bytes   [2]int64
}

func (o *sweepOp) kind() string  { return "sweep" }
func (o *sweepOp) shrinks() bool { return true }
func (o *sweepOp) phases() phase { return phaseQueue | phaseKeptAfter }
func (o *sweepOp) weight() int   { return len(o.keys) * 64 }
func (o *sweepOp) stage(ph phase, txn *badger.Txn, _ *uint64) error {
	i := 0
	if ph == phaseKeptAfter {
		i = 1
	}
	o.removed[i], o.bytes[i] = 0, 0
	for _, k := range o.keys {
		if id, exp, ok := getOnce(txn, k); !ok || o.now.Before(exp) && !o.ids[id] {
			continue
		}
		if err := txn.Delete(k); err != nil {
			return err
		}
		o.removed[i]++
		o.bytes[i] += int64(len(k)) + onceValueLen
	}
	return nil
}
func (o *sweepOp) settle(l *ledger, _ time.Time) {
	n, b := o.removed[0]+o.removed[1], o.bytes[0]+o.bytes[1]
	l.once.keys = max(0, l.once.keys-int64(n))
	l.once.bytes = max(0, l.once.bytes-b)
}

// now is the spool's clock for key expiry.
func (s *Spool) now() time.Time { return s.opts.Now() }

// HostDeduped returns how many webhooks for host were answered with an
// earlier one's id since the spool opened.
func (s *Spool) HostDeduped(host string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ledger.once.deduped[host]
}

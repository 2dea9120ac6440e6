package spool

import (
	badger "github.com/dgraph-io/badger/v4"
)

// WhereNow is where webhook id of host, without an outcome in the
// journal, is: StateQueued or StateInFlight at a position in its lane (1:
// next), OutcomeDead (buried, its outcome not recorded) or StateUnknown
// (gone).
func (s *Spool) WhereNow(host string, id uint64) (state string, position int) {
	s.mu.Lock()
	inFlight := s.coal.inflight[id] > 0
	s.mu.Unlock()
	txn := s.queue.NewTransactionAt(^uint64(0), false)
	defer txn.Discard()
	lane, queued := s.findQueued(txn, host, id)
	if !queued {
		state = StateUnknown
		s.kept.View(func(txn *badger.Txn) error {
			if _, err := txn.Get(deadKey(id)); err == nil {
				state = OutcomeDead
			}
			return nil
		})
		return state, 0
	}
	state = StateQueued
	if inFlight {
		state = StateInFlight
	}
	// Its position is within its lane (lane.go): the lanes of a host are
	// served in turn, so a position in the whole host's queue would say
	// less about when it goes, and would take reading other lanes.
	prefix := queuePrefix(host)
	if lane != (Lane{}) {
		prefix = lanePrefix(host, lane)
	}
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	end := laneKey(host, lane, id)
	for it.Rewind(); it.Valid() && string(it.Item().Key()) <= string(end); it.Next() {
		position++
	}
	return state, position
}

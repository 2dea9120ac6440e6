package spool

import (
	"encoding/binary"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// An outcome ahead is the history's record of the outcomes of webhooks a
// round removes, written in the queue by the very round that removes
// them (History.Leaving), and removed once the history has made those
// outcomes durable where it keeps them (DropAhead):
//
//	queue/  w <id:8>   a record of the history's, under an id it chose
//
// So a round that removes webhooks syncs one file, the queue's, and what
// a crash takes from the history's own writes is still in the queue: as
// the webhooks, or as their outcomes ahead. The history reads them back
// at the next start (Spool.Ahead).
const prefixAhead = 'w'

func aheadKey(id uint64) []byte { return binary.BigEndian.AppendUint64([]byte{prefixAhead}, id) }

// Ahead is one record the history keeps in the queue (History.Leaving).
// Records under ValueThreshold stay in the queue's log, inline: a round
// that writes them syncs that log alone.
type Ahead struct {
	ID  uint64
	Rec []byte
}

// aheadOp writes a round's outcomes ahead. It is staged before the
// round's removals, in its first transaction: a crash may keep an
// outcome whose webhook is still queued, which the history takes as a
// delivery that a crash made happen twice, never the other way round.
type aheadOp struct {
	opBase
	recs []Ahead
}

func (o *aheadOp) kind() string  { return "ahead" }
func (o *aheadOp) shrinks() bool { return true } // it goes with removals
func (o *aheadOp) phases() phase { return phaseQueue }
func (o *aheadOp) weight() int {
	n := 0
	for _, a := range o.recs {
		n += len(a.Rec) + 9 + 64
	}
	return n
}
func (o *aheadOp) stage(_ phase, txn *badger.Txn, _ *uint64) error {
	for _, a := range o.recs {
		if err := txn.Set(aheadKey(a.ID), a.Rec); err != nil {
			return err
		}
	}
	return nil
}
func (o *aheadOp) settle(*ledger, time.Time) {}

// Ahead calls fn with each record ahead in the queue (see prefixAhead), in
// the order of their ids. rec is valid only during the call.
func (s *Spool) Ahead(fn func(id uint64, rec []byte) error) error {
	txn := s.readTxn(s.queue)
	defer txn.Discard()
	return eachID(txn, prefixAhead, false, func(id uint64, item *badger.Item) (bool, error) {
		return true, item.Value(func(v []byte) error { return fn(id, v) })
	})
}

// DropAhead removes the records ahead of ids, whose outcomes the history
// has made durable, in a later round; it does not wait. Once the spool is
// closed it does nothing: the next start finds them, and the history
// takes them again.
func (s *Spool) DropAhead(ids []uint64) {
	for len(ids) > 0 {
		// One op's deletes fit in one transaction: at most about 6,500
		// entries at the queue's memtable.
		part := ids[:min(len(ids), 1024)]
		ids = ids[len(part):]
		s.submit(&dropAheadOp{ids: part})
	}
}

// dropAheadOp removes records ahead (DropAhead).
type dropAheadOp struct {
	opBase
	ids []uint64
}

func (o *dropAheadOp) kind() string  { return "drop-ahead" }
func (o *dropAheadOp) shrinks() bool { return true }
func (o *dropAheadOp) phases() phase { return phaseQueue }
func (o *dropAheadOp) weight() int   { return 9*len(o.ids) + 64 }
func (o *dropAheadOp) stage(_ phase, txn *badger.Txn, _ *uint64) error {
	for _, id := range o.ids {
		if err := txn.Delete(aheadKey(id)); err != nil {
			return err
		}
	}
	return nil
}
func (o *dropAheadOp) settle(*ledger, time.Time) {}

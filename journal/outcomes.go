package journal

// The journal's outcome index: a key per entry with an outcome,
//
//	dead/   o <outcome> 0x00 <id:8>   -> nothing
//
// written with the outcome's record and swept with the entry, so that a
// listing by state (msg list --state dead) reads the entries in that
// state, not the whole journal. A journal written before the index has it
// built once, at Open (indexOutcomes), and a key marks it done.

import (
	"encoding/binary"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/internal/record"
)

var keyOutcomeIndexed = []byte("jo")

func outcomeIndexPrefix(outcome string) []byte {
	return append(append([]byte{prefixOutcomeIndex}, outcome...), 0)
}

func outcomeIndexKey(outcome string, id uint64) []byte {
	return binary.BigEndian.AppendUint64(outcomeIndexPrefix(outcome), id)
}

// listOutcome is List for one outcome, from its index: newest first, and
// the cursor of the next page.
func (j *Journal) listOutcome(txn *badger.Txn, q *Query, out *[]*Entry) (uint64, error) {
	return j.listIndex(txn, q, outcomeIndexPrefix(q.State), func(id uint64) []byte { return outcomeIndexKey(q.State, id) }, out)
}

// indexOutcomes builds the outcome index of a journal written before it,
// once: a key per entry with an outcome, then the mark that it is done.
func (j *Journal) indexOutcomes() error {
	done := false
	if err := j.kept.View(func(txn *badger.Txn) error {
		_, err := txn.Get(keyOutcomeIndexed)
		done = err == nil
		return nil
	}); err != nil || done {
		return err
	}
	wb := j.kept.NewWriteBatch()
	defer wb.Cancel()
	err := j.kept.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixJournal}, PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		trim := scanTrim{st: j.st}
		for it.Rewind(); it.Valid(); it.Next() {
			trim.step()
			k := it.Item().Key()
			if len(k) != 9 {
				continue
			}
			id := record.BeUint64(k[1:])
			var e *Entry
			if it.Item().Value(func(v []byte) (err error) { e, err = decodeEntryHead(id, v); return err }) != nil || e.Outcome == "" {
				continue
			}
			if err := wb.Set(outcomeIndexKey(e.Outcome, id), nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := wb.Set(keyOutcomeIndexed, nil); err != nil {
		return err
	}
	return wb.Flush()
}

package journal

// A webhook queued again under a new id (a dead letter replayed, a
// delivered one resent) keeps the id the app got (Origin), and its new
// entry is linked from the first one's:
//
//	dead/   a <origin:8> 'r' <id:8>   a later life of the webhook with id origin
//
// under the first entry's attempts' prefix, so that the sweep removes the
// links with it and reading attempts passes over them (their keys are not
// an attempt's length). A lookup by the app's id follows them: one id,
// the current state of the last life, every attempt of all of them in
// order. A listing shows only the last life of each webhook.

import (
	"bytes"
	"encoding/binary"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/internal/record"
	"github.com/hookpace/hookpace/spool"
)

func relivePrefix(origin uint64) []byte { return append(attemptPrefix(origin), 'r') }

func reliveKey(origin, id uint64) []byte {
	return binary.BigEndian.AppendUint64(relivePrefix(origin), id)
}

// reliveRec is the link from m's first entry to its new one, for a
// message queued again under the id this spool gave it; ok is false for
// any other.
func reliveRec(m *spool.Message) (journalRec, bool) {
	if m.Origin == 0 || m.Origin == m.ID || m.OriginSpool != 0 {
		return journalRec{}, false
	}
	k := reliveKey(m.Origin, m.ID)
	return journalRec{key: k, val: nil, grow: int64(len(k))}, true
}

// lives reads the ids of origin's later lives, oldest first.
func lives(txn *badger.Txn, origin uint64) []uint64 {
	var out []uint64
	prefix := relivePrefix(origin)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		if k := it.Item().Key(); len(k) == len(prefix)+8 {
			out = append(out, record.BeUint64(k[len(prefix):]))
		}
	}
	return out
}

// supersededBy reports whether a later life of e's webhook exists: then
// e's state is not the webhook's. it iterates over the kept database.
func supersededBy(it *badger.Iterator, e *Entry) bool {
	origin := e.Origin
	if origin == 0 {
		origin = e.ID
	} else if e.OriginSpool != 0 {
		return false // handed off from another spool: its lives are not linked here
	}
	prefix := relivePrefix(origin)
	it.Seek(reliveKey(origin, e.ID+1))
	return it.Valid() && bytes.HasPrefix(it.Item().Key(), prefix)
}

package journal

// A webhook queued again under a new id (a dead letter replayed, a
// delivered one resent) keeps the id the app got (Origin), and its new
// entry is linked from the first one's:
//
//	dead/   a <origin:8> 'r' <id:8>   a later life of the webhook with id origin
//
// under the first entry's attempts' prefix, so that the sweep removes the
// links with it and reading attempts passes over them (their keys are not
// an attempt's length). The link is written when the later life leaves
// the queue, with its entry, as every entry is: nothing at ingest. While
// it is queued the journal knows it from the queue (queuedLives, built
// at Open from the queue's records like the queued index). A lookup by
// the app's id follows both: one id, the current state of the last life,
// every attempt of all of them in order. A listing shows only the last
// life of each webhook.

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sync"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/internal/record"
	"github.com/hookpace/hookpace/spool"
)

func relivePrefix(origin uint64) []byte { return append(attemptPrefix(origin), 'r') }

func reliveKey(origin, id uint64) []byte {
	return binary.BigEndian.AppendUint64(relivePrefix(origin), id)
}

// reliveOrigin is the id of m's first life, for a message queued again
// under the id this spool gave it; 0 for any other.
func reliveOrigin(m *spool.Message) uint64 { return firstLife(m.ID, m.Origin, m.OriginSpool) }

// firstLife is the id of the first life of the webhook id whose origin
// is origin on originSpool (0: this one), for one queued again under the
// id this spool gave it; 0 for any other.
func firstLife(id, origin, originSpool uint64) uint64 {
	if origin == 0 || origin == id || originSpool != 0 {
		return 0
	}
	return origin
}

// reliveRec is the link from the first entry, origin's, to the later
// life id. It is written only while the first entry is there: one swept
// keeps no links.
func reliveRec(origin, id uint64) journalRec {
	k := reliveKey(origin, id)
	return journalRec{key: k, val: nil, grow: int64(len(k)), needs: journalKey(origin)}
}

// lives reads the ids of origin's later lives, oldest first: those that
// left the queue (their links) and those queued.
func (j *Journal) lives(txn *badger.Txn, origin uint64) []uint64 {
	out := j.relived.of(origin)
	prefix := relivePrefix(origin)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		if k := it.Item().Key(); len(k) == len(prefix)+8 {
			out = append(out, record.BeUint64(k[len(prefix):]))
		}
	}
	// A life whose link is written and which the queue has not yet
	// forgotten (or a crash left in both) is one.
	slices.Sort(out)
	return slices.Compact(out)
}

// queuedLives are the later lives still queued, by their first life's id.
// Settled keeps it in step; listings read it off the spool's lock.
type queuedLives struct {
	mu sync.RWMutex
	by map[uint64][]uint64 // origin -> ids, ascending
}

func (l *queuedLives) add(origin, id uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by == nil {
		l.by = make(map[uint64][]uint64)
	}
	ids := l.by[origin]
	if i, found := slices.BinarySearch(ids, id); !found {
		l.by[origin] = slices.Insert(ids, i, id)
	}
}

func (l *queuedLives) remove(origin, id uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := slices.DeleteFunc(l.by[origin], func(v uint64) bool { return v == id })
	if len(ids) == 0 {
		delete(l.by, origin)
	} else {
		l.by[origin] = ids
	}
}

// of is a copy of origin's queued lives.
func (l *queuedLives) of(origin uint64) []uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return slices.Clone(l.by[origin])
}

// after reports whether a life of origin above id is queued.
func (l *queuedLives) after(origin, id uint64) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	ids := l.by[origin]
	return len(ids) > 0 && ids[len(ids)-1] > id
}

// supersededBy reports whether a later life of e's webhook exists, queued
// (queued) or linked: then e's state is not the webhook's. it iterates
// over the kept database.
func supersededBy(it *badger.Iterator, queued *queuedLives, e *Entry) bool {
	origin := e.Origin
	if origin == 0 {
		origin = e.ID
	} else if e.OriginSpool != 0 {
		return false // handed off from another spool: its lives are not linked here
	}
	if queued.after(origin, e.ID) {
		return true
	}
	prefix := relivePrefix(origin)
	it.Seek(reliveKey(origin, e.ID+1))
	return it.Valid() && bytes.HasPrefix(it.Item().Key(), prefix)
}

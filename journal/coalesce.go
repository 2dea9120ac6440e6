package journal

import (
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/spool"
)

// A journal entry's coalesce key: the key is not part of a
// queued webhook's record (proxy takes the header out; coalesce.go keeps
// which webhook a key names in memory), so the journal keeps, for a
// queued webhook accepted with one, a note: its entry without an outcome
// and without index keys (the queue lists it), written when it is
// accepted and when a later webhook replaces its content. This is the one
// journal write at ingest, for webhooks with a coalesce key only. The run
// also remembers, for the queued webhooks it accepted with one, the key,
// the arrival, and how often and when last a later webhook replaced the
// content. An outcome rewrites the whole entry (write.go) with
// what is remembered; for a webhook the run does not know (accepted by an earlier
// run, or forgotten when there were more than maxJournalCoal), the
// journal's writer reads it from the entry's record instead (mergeEntry):
// one read per outcome of the backlog a start finds. A webhook without a
// key accepted by this run costs nothing of this: the ids of this run
// are above coalFrom, and the run knows all of their keys.

// coalInfo is what the journal remembers of a queued webhook with a
// coalesce key.
type coalInfo struct {
	key      string
	accepted time.Time
	replaced int
	last     time.Time
}

// maxJournalCoal bounds the webhooks remembered; beyond it all are
// forgotten, and their outcomes read the rest from their records.
const maxJournalCoal = 100_000

// coalesceRecLocked is the note of c's webhook, queued with a coalesce key:
// its entry with the key, and for a replacement of a queued webhook's
// content, the entry of that webhook (which keeps its id, place and
// arrival) with one replacement more. ok is false for a webhook without a
// key. Mutex held.
func (j *Journal) coalesceRecLocked(c spool.Change) (r journalRec, ok bool) {
	m := c.Msg
	r = journalRec{e: entryOf(m)}
	if !j.coalSet {
		// The run's first new webhook: the ids of those before it are
		// of earlier runs. (A replacement is never the first: its
		// target came before it.)
		j.coalFrom, j.coalSet = m.ID-1, true
	}
	if c.Coalesce == "" {
		return r, false
	}
	e := r.e
	e.Coalesce = c.Coalesce
	if !c.Replaces { // queued anew: the key names it now
		if len(j.coal) >= maxJournalCoal {
			j.coal, j.coalFrom = nil, j.st.SeqLocked() // those queued now are forgotten
		}
		if j.coal == nil {
			j.coal = make(map[uint64]*coalInfo)
		}
		j.coal[m.ID] = &coalInfo{key: e.Coalesce, accepted: m.Enqueued}
		return r, true
	}
	// It rewrites its target's note.
	info := j.coal[m.ID]
	if info == nil {
		r.merge, r.replaced = true, true
		e.Replaced, e.ReplacedAt = 1, m.Enqueued
		return r, true
	}
	info.replaced++
	info.last = m.Enqueued
	e.Accepted, e.Replaced, e.ReplacedAt = info.accepted, info.replaced, info.last
	return r, true
}

// outcomeCoalesceLocked completes an outcome's record with what the run
// remembers of its webhook's coalesce key, and forgets it; or, for one the
// run may not know, has the writer read it. Mutex held.
func (j *Journal) outcomeCoalesceLocked(r *journalRec) {
	if info := j.coal[r.e.ID]; info != nil {
		delete(j.coal, r.e.ID)
		r.e.Coalesce, r.e.Replaced, r.e.ReplacedAt = info.key, info.replaced, info.last
		return
	}
	r.merge = !j.coalSet || r.e.ID <= j.coalFrom
}

// mergeEntry completes e with what only its entry's record says: its
// coalesce key and replacements, and for a replacement (replaced) its
// arrival and the replacements before this one. A record that already
// has an outcome was written by a round whose queue delete a crash lost:
// the webhook was sent again, and its first delivery stays, as an
// attempt. A record that cannot be read leaves e as it is: e replaces it.
func mergeEntry(txn *badger.Txn, e *Entry, replaced bool) {
	item, err := txn.Get(journalKey(e.ID))
	if err != nil {
		return
	}
	item.Value(func(v []byte) error {
		old, err := decodeEntry(e.ID, v)
		if err != nil {
			return nil
		}
		if e.Coalesce == "" {
			e.Coalesce = old.Coalesce
		}
		if replaced {
			e.Accepted = old.Accepted
			e.Replaced += old.Replaced
		} else {
			e.Replaced, e.ReplacedAt = old.Replaced, old.ReplacedAt
		}
		if a := old.Final; old.Outcome != "" && a != nil && e.Outcome != "" {
			txn.Set(attemptKey(e.ID, a.At), encodeAttempt(a))
		}
		return nil
	})
}

// coalesceOf completes the queued webhooks' entries of a listing (made
// from their queue records) with their coalesce keys and replacements:
// what the run remembers, or else their notes.
func (j *Journal) coalesceOf(es []*Entry) {
	var read []*Entry
	j.mu.Lock()
	for _, e := range es {
		if e.Outcome != "" || e.Coalesce != "" {
			continue
		}
		if info := j.coal[e.ID]; info != nil {
			e.Coalesce, e.Replaced, e.ReplacedAt = info.key, info.replaced, info.last
		} else if !j.coalSet || e.ID <= j.coalFrom {
			read = append(read, e) // of an earlier run, or forgotten
		}
	}
	j.mu.Unlock()
	if len(read) == 0 {
		return
	}
	j.kept.View(func(txn *badger.Txn) error {
		for _, e := range read {
			if note, err := journalEntry(txn, e.ID); err == nil {
				e.Coalesce, e.Replaced, e.ReplacedAt = note.Coalesce, note.Replaced, note.ReplacedAt
			}
		}
		return nil
	})
}

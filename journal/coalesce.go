package journal

import (
	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/spool"
)

// A journal entry's coalesce key: the queue's record of a webhook
// accepted with one keeps the key, how often a later webhook replaced its
// content and when last (spool.Message.Coalesce), so the journal writes
// nothing at its ingest: a queued webhook's listing reads them from its
// record, and its entry, written when it leaves the queue, takes them
// from its message. Queue records written before records kept the key
// have a note in the journal instead (an entry without an outcome and
// without index keys), written at their ingest and at each replacement:
// an outcome of a webhook the run did not accept (ids at or below
// coalFrom) reads it (mergeEntry), and so does a listing of such a queued
// webhook (coalesceOf): one read per outcome of the backlog a start
// finds.

// noteCoalesceLocked notes, from c, the first webhook the run accepts:
// the ids of those before it are of earlier runs. (A replacement is never
// the first: its target came before it.) Mutex held.
func (j *Journal) noteCoalesceLocked(c spool.Change) {
	if !j.coalSet {
		j.coalFrom, j.coalSet = c.Msg.ID-1, true
	}
}

// outcomeCoalesceLocked has the writer read an outcome's note, for a
// webhook an earlier run accepted. Mutex held.
func (j *Journal) outcomeCoalesceLocked(r *journalRec) {
	r.merge = !j.coalSet || r.e.ID <= j.coalFrom
}

// mergeEntry completes e with what only its entry's record says: its
// coalesce key and replacements, and for a replacement (replaced) its
// arrival and the replacements before this one. A record that already
// has an outcome was written by a round whose queue delete a crash lost:
// the webhook was sent again, and its first delivery stays, as an
// attempt. A record that cannot be read leaves e as it is: e replaces it.
// changed says e changed; again says the record is e's very outcome,
// written before (an outcome ahead taken again at a start).
func mergeEntry(txn *badger.Txn, e *Entry) (changed, again bool) {
	item, err := txn.Get(journalKey(e.ID))
	if err != nil {
		return false, false
	}
	item.Value(func(v []byte) error {
		old, err := decodeEntry(e.ID, v)
		if err != nil {
			return nil
		}
		if old.Outcome != "" && old.Outcome == e.Outcome && old.OutcomeAt.Equal(e.OutcomeAt) {
			again = true
			return nil
		}
		changed = true
		if e.Coalesce == "" { // its queue record kept no key
			e.Coalesce, e.Replaced, e.ReplacedAt = old.Coalesce, old.Replaced, old.ReplacedAt
		} else if old.Outcome == "" {
			// A note: the replacements before the record kept them.
			e.Replaced += old.Replaced
			if old.ReplacedAt.After(e.ReplacedAt) {
				e.ReplacedAt = old.ReplacedAt
			}
		}
		if a := old.Final; old.Outcome != "" && a != nil && e.Outcome != "" {
			txn.Set(attemptKey(e.ID, a.At), encodeAttempt(a))
		}
		return nil
	})
	return changed, again
}

// coalesceOf completes the queued webhooks' entries of a listing (made
// from their queue records) whose records say no coalesce key, of an
// earlier run, with their notes.
func (j *Journal) coalesceOf(es []*Entry) {
	var read []*Entry
	j.mu.Lock()
	for _, e := range es {
		if e.Outcome == "" && e.Coalesce == "" && (!j.coalSet || e.ID <= j.coalFrom) {
			read = append(read, e)
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

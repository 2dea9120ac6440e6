package journal

import (
	"errors"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/internal/record"
	"github.com/hookpace/hookpace/spool"
)

// ErrNotFound: the journal has no such webhook.
var ErrNotFound = errors.New("no such webhook in the journal")

// View is what the journal knows of one webhook, and where it is now.
type View struct {
	Entry    Entry
	State    string // an Outcome, or one of the states above
	Position int    // while queued: 1 for the head of its host's queue
	Attempts []*spool.Attempt
	// Requeued is when the last life was queued (a dead letter replayed,
	// a delivered webhook resent): its max_age counts from then. Zero for
	// a webhook in its first life. Entry.Accepted is the first life's.
	Requeued time.Time
}

// Lookup finds a webhook by its id (see Ref; a short id is of this spool).
// A webhook queued again since under a new id (replays.go) is
// one: the entry and state of its last life, the attempts of all of them
// in order.
func (j *Journal) Lookup(r spool.Ref) (*View, error) {
	if r.Spool != 0 && r.Spool != j.instance {
		return nil, fmt.Errorf("%w: %s was accepted by another hookpace (spool %s)", ErrNotFound, r, spool.IDString(r.Spool))
	}
	j.Sync()
	var v *View
	var first time.Time
	err := j.kept.View(func(txn *badger.Txn) error {
		ids := append([]uint64{r.Seq}, j.lives(txn, r.Seq)...)
		for i, id := range ids {
			e, err := j.entry(txn, id)
			if errors.Is(err, ErrNotFound) && (i > 0 || len(ids) > 1) {
				continue // swept, or a dead letter from before the journal replayed since
			} else if err != nil {
				return err
			}
			var before []*spool.Attempt
			if v != nil {
				before = v.Attempts
			}
			if v == nil {
				first = e.Accepted
			}
			v = &View{Entry: *e, State: e.Outcome}
			as, err := attempts(txn, id)
			if err != nil {
				return err
			}
			v.Attempts = append(before, as...)
			if e.Final != nil {
				v.Attempts = append(v.Attempts, e.Final)
			}
		}
		if v == nil {
			return fmt.Errorf("%w: %s", ErrNotFound, spool.IDString(r.Seq))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !v.Entry.Accepted.Equal(first) {
		v.Requeued, v.Entry.Accepted = v.Entry.Accepted, first
	}
	if v.State == "" {
		v.State, v.Position = j.st.WhereNow(v.Entry.Host, v.Entry.ID)
	}
	return v, nil
}

// entry reads id's journal entry; or, for a webhook without one, makes
// it from its queued record, or from its dead letter.
func (j *Journal) entry(txn *badger.Txn, id uint64) (*Entry, error) {
	e, err := journalEntry(txn, id)
	if !errors.Is(err, ErrNotFound) {
		return e, err
	}
	if e, err = j.queuedEntry(id); !errors.Is(err, ErrNotFound) {
		return e, err
	}
	// A dead letter from before the journal.
	item, err := txn.Get(spool.DeadKey(id))
	if err == nil {
		err = item.Value(func(v []byte) error {
			d, err := spool.DecodeDead(id, v)
			if err == nil {
				e = entryFor(d.Message)
				e.Outcome, e.OutcomeAt, e.Reason = spool.OutcomeDead, d.DiedAt, d.Reason
			}
			return err
		})
		return e, err
	}
	if !errors.Is(err, badger.ErrKeyNotFound) {
		return nil, err
	}
	// It left the queue after txn began: its entry was written before.
	err = j.kept.View(func(txn *badger.Txn) (err error) { e, err = journalEntry(txn, id); return err })
	return e, err
}

// journalEntry reads id's entry in the journal.
func journalEntry(txn *badger.Txn, id uint64) (*Entry, error) {
	item, err := txn.Get(journalKey(id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, spool.IDString(id))
	} else if err != nil {
		return nil, err
	}
	var e *Entry
	err = item.Value(func(v []byte) (err error) { e, err = decodeEntry(id, v); return err })
	return e, err
}

// attempts reads id's attempts, oldest first.
func attempts(txn *badger.Txn, id uint64) ([]*spool.Attempt, error) {
	var out []*spool.Attempt
	it := txn.NewIterator(badger.IteratorOptions{Prefix: attemptPrefix(id), PrefetchValues: true, PrefetchSize: 16})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		k := it.Item().Key()
		if len(k) != 17 {
			continue
		}
		at := int64(record.BeUint64(k[9:]))
		err := it.Item().Value(func(v []byte) error {
			a, err := decodeAttempt(at, v)
			if err == nil {
				out = append(out, a)
			}
			return err
		})
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// Query selects journal entries. Zero fields select everything.
type Query struct {
	Host         string
	State        string // an Outcome, or "queued" for those without one
	Since, Until time.Time
	Before       Cursor // the cursor: the entries before it only
	Limit        int    // default 50
	// Idempotency: only the webhooks with this Idempotency-Key. Contains:
	// only those whose request holds this text, as far as it is kept
	// (search.go).
	Idempotency string
	Contains    string

	later   *badger.Iterator // for supersededBy: List's
	relived *queuedLives     // for supersededBy: the later lives queued
	queue   *badger.Txn      // List's read of the queue (stillQueued)
}

// queryScanMax bounds the entries one query reads.
const queryScanMax = 200_000

// List returns the entries q selects, newest first (by acceptance, from
// the indexes; by id while they are built), and the cursor of the next
// page: zero when no entry after the page matches. The queued webhooks
// come from the queue (queued.go), the others from the journal.
// A page reads at most queryScanMax entries of the journal, for at most
// about queryTime, and the queue for as long again: a search that finds
// fewer than q.Limit in that returns what it found and a cursor.
func (j *Journal) List(q Query) ([]*Entry, Cursor, error) {
	if q.Limit <= 0 {
		q.Limit = 50
	}
	j.Sync()
	legacy := !j.indexed.Load()
	// The queue first: what leaves it meanwhile is in the journal by then.
	qtxn := j.st.ReadQueue()
	defer qtxn.Discard()
	queued, qnext, err := j.listQueued(qtxn, &q, legacy)
	if err != nil {
		return nil, Cursor{}, err
	}
	var out []*Entry
	var next Cursor
	err = j.kept.View(func(txn *badger.Txn) error {
		lit := txn.NewIterator(badger.IteratorOptions{})
		defer lit.Close()
		q.later, q.queue, q.relived = lit, qtxn, &j.relived
		if !legacy {
			var err error
			next, err = j.listIndexed(txn, &q, &out)
			return err
		}
		n, err := j.listLegacy(txn, &q, &out)
		next = Cursor{ID: n}
		return err
	})
	if err != nil {
		return nil, Cursor{}, err
	}
	out, next = mergePages(queued, qnext, out, next, q.Limit, legacy)
	j.coalesceOf(out)
	return out, next, nil
}

// listLegacy is List from the indexes by id a journal had before those of
// index.go, while those are built: the host's, the outcome's, or
// a scan. The cursor is an id.
func (j *Journal) listLegacy(txn *badger.Txn, q *Query, out *[]*Entry) (next uint64, err error) {
	if q.Before.At != 0 {
		q.Before = Cursor{ID: q.Before.ID}
	}
	{
		if q.Host != "" {
			return j.listHost(txn, q, out)
		}
		if q.State != "" && q.State != spool.StateQueued {
			return j.listOutcome(txn, q, out)
		}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixJournal}, Reverse: true, PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		seek := journalKey(^uint64(0))
		if q.Before.ID != 0 {
			seek = journalKey(q.Before.ID - 1)
		}
		scanned := 0
		for it.Seek(seek); it.Valid(); it.Next() {
			k := it.Item().Key()
			if len(k) != 9 {
				continue
			}
			id := record.BeUint64(k[1:])
			if scanned == queryScanMax {
				return id + 1, nil
			}
			scanned++
			if e, ok := j.matchItem(txn, q, id, it.Item()); ok {
				if len(*out) == q.Limit {
					return id + 1, nil // the next page starts with this one
				}
				*out = append(*out, e)
			}
		}
		return 0, nil
	}
}

// listHost is List for one host, from its index: newest first, and the
// cursor of the next page.
func (j *Journal) listHost(txn *badger.Txn, q *Query, out *[]*Entry) (uint64, error) {
	return j.listIndex(txn, q, hostIndexPrefix(q.Host), func(id uint64) []byte { return hostIndexKey(q.Host, id) }, out)
}

// listIndex is List over one index of journal ids (keys prefix + a
// big-endian id, key(id) one of them): newest first, at most
// queryScanMax entries read, and the cursor of the next page.
func (j *Journal) listIndex(txn *badger.Txn, q *Query, prefix []byte, key func(id uint64) []byte, out *[]*Entry) (uint64, error) {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true})
	defer it.Close()
	seek := key(^uint64(0))
	if q.Before.ID != 0 {
		seek = key(q.Before.ID - 1)
	}
	scanned := 0
	for it.Seek(seek); it.Valid(); it.Next() {
		k := it.Item().Key()
		if len(k) != len(prefix)+8 {
			continue
		}
		id := record.BeUint64(k[len(prefix):])
		if scanned == queryScanMax {
			return id + 1, nil
		}
		scanned++
		item, err := txn.Get(journalKey(id))
		if err != nil {
			continue // swept meanwhile
		}
		if e, ok := j.matchItem(txn, q, id, item); ok {
			if len(*out) == q.Limit {
				return id + 1, nil // the next page starts with this one
			}
			*out = append(*out, e)
		}
	}
	return 0, nil
}

func (q *Query) match(e *Entry) bool {
	switch {
	case q.Host != "" && e.Host != q.Host:
		return false
	case q.State == spool.StateQueued && e.Outcome != "":
		return false
	case q.State != "" && q.State != spool.StateQueued && e.Outcome != q.State:
		return false
	case !q.Since.IsZero() && e.Accepted.Before(q.Since):
		return false
	case !q.Until.IsZero() && !e.Accepted.Before(q.Until):
		return false
	case q.Idempotency != "" && e.Idempotency != q.Idempotency:
		return false
	case e.Outcome != "" && q.later != nil && supersededBy(q.later, q.relived, e):
		return false // a later life of the webhook says its state
	}
	return true
}

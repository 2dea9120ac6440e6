package journal

// The journal's view of a queued webhook is the queue's record: the
// journal writes no entry when a webhook is accepted, only when it leaves
// the queue (write.go). So a lookup and a listing read the queued
// webhooks from the queue, and the finished ones from the
// journal, and the journal is read after the queue: a webhook that leaves
// the queue in between is in the journal by then (its entry is durable
// before the queue's delete), and is shown once, with its outcome.
//
// How each filter reads the queued webhooks: the journal's index of them
// in memory (queued_index.go) holds their ids in order, each with
// its queue key, and their ids by Idempotency-Key; ids are given in the
// order webhooks are accepted, so newest first is highest id first.
//   - none, state queued: the index's highest ids below the cursor, then
//     the page's records from the queue;
//   - host: the same, the index's ids of that host only;
//   - a state other than queued: the queue is not read;
//   - since, until: as ids, from the journal's index of every entry (x t):
//     the ids between the newest entry before since and the oldest at or
//     after until; the records at the edges are checked;
//   - idempotency key: the index's ids of that key, their records checked;
//   - contains: the records newest first, as a search of the journal
//     reads entries, for at most about queryTime a page.
//
// So a page reads the records it shows, whatever the journal and the
// queue hold. A webhook handed over from another hookpace keeps its first
// acceptance time under a new id: it is listed by its id's place.

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/spool"
)

// queuedPrefixes are the prefixes of the queue's keys for host, or of
// every host's.
func queuedPrefixes(host string) [][]byte { return spool.QueuePrefixes(host) }

// entryPos is e's place in a listing: by acceptance and id, or by id
// alone while the journal's indexes are built (legacy).
func entryPos(e *Entry, legacy bool) pos {
	if legacy {
		return pos{0, e.ID}
	}
	return pos{atOf(e.Accepted), e.ID}
}

func (p pos) less(o pos) bool { return p.at < o.at || p.at == o.at && p.id < o.id }

// listQueued is the queued webhooks q selects, newest first, from the
// queue's records as txn sees them: at most q.Limit+1, and where they
// stop: every match at or after that place is among them (zero: all of
// them are). It is one pass over the queue's keys (the host's, for q.Host):
// the keys alone, reading the records of the page only, unless q needs
// the records to select (Until, Idempotency, Contains), which it then
// reads as it goes.
func (j *Journal) listQueued(txn *badger.Txn, q *Query, legacy bool) ([]*Entry, Cursor, error) {
	if q.State != "" && q.State != spool.StateQueued {
		return nil, Cursor{}, nil
	}
	below := uint64(math.MaxUint64)
	if q.Before.ID != 0 {
		below = q.Before.ID
	}
	// The place before which entries are selected (exclusive).
	end := pos{math.MaxInt64, math.MaxUint64}
	if b := q.Before; !b.IsZero() && !legacy && b.At != 0 {
		end = pos{b.At, b.ID}
	}
	if !legacy && !q.Until.IsZero() {
		if u := (pos{atOf(q.Until), 0}); u.less(end) {
			end = u
		}
	}
	since := atOf(q.Since)
	// selects reports whether q selects m, its cheap fields first.
	selects := func(m *spool.Message) (*Entry, bool) {
		p := pos{atOf(m.Enqueued), m.ID}
		if legacy {
			p.at = 0
		}
		if !p.less(end) || atOf(m.Enqueued) < since {
			return nil, false
		}
		if q.Idempotency != "" && m.Header.Get("Idempotency-Key") != q.Idempotency {
			return nil, false
		}
		e := entryFor(m)
		if !q.match(e) || q.Contains != "" && !entryContains(e, q.Contains) && !bytes.Contains(m.Body, []byte(q.Contains)) {
			return nil, false
		}
		return e, true
	}
	// Until and since as ids, from the journal's entries around them.
	above := uint64(0)
	if !legacy {
		lo, hi := j.idsAround(q.Since, q.Until)
		below, above = min(below, hi), lo
	}
	n := q.Limit + 1
	deadline := time.Now().Add(queryTime)
	var out []*Entry
	var last pos // of the last record read
	for {
		j.mu.Lock()
		var cs []candidate
		if j.queued != nil {
			cs = j.queued.before(below, above, q.Host, q.Idempotency, n)
		}
		j.mu.Unlock()
		for _, c := range cs {
			item, err := txn.Get(spool.LaneKey(c.ref.host, c.ref.lane, c.id))
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue // it left the queue: the journal has it
			} else if err != nil {
				return nil, Cursor{}, err
			}
			m, err := j.st.DecodeQueued(c.ref.host, c.ref.lane, c.id, item)
			if err != nil {
				continue // one that cannot be read is not listed
			}
			last = pos{atOf(m.Enqueued), m.ID}
			if legacy {
				last.at = 0
			}
			if e, ok := selects(m); ok {
				e.Header = nil // a listing shows none
				out = append(out, e)
			}
		}
		sortNewestFirst(out, legacy)
		if len(out) >= n {
			out = out[:n]
			p := entryPos(out[n-1], legacy)
			return out, Cursor{At: p.at, ID: p.id}, nil
		}
		if len(cs) < n || q.Idempotency != "" { // every candidate was read
			return out, Cursor{}, nil
		}
		below = cs[len(cs)-1].id
		if last.id != 0 && time.Now().After(deadline) {
			// A search (contains) says where it stopped: every match
			// at or after the last record read is found.
			return out, Cursor{At: last.at, ID: last.id}, nil
		}
	}
}

// idsAround bounds the ids of the webhooks accepted in [since, until) by
// the journal's entries around them (ids are given in the order webhooks
// are accepted): every one has an id above lo and below hi. Zero times
// bound nothing.
func (j *Journal) idsAround(since, until time.Time) (lo, hi uint64) {
	hi = math.MaxUint64
	if since.IsZero() && until.IsZero() {
		return 0, hi
	}
	prefix := indexPrefix(ixAll, "")
	j.kept.View(func(txn *badger.Txn) error {
		if !until.IsZero() { // the oldest entry at or after until
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
			if it.Seek(indexKey(prefix, pos{atOf(until), 0})); it.Valid() {
				if p, ok := posOf(it.Item().Key(), len(prefix)); ok {
					hi = p.id
				}
			}
			it.Close()
		}
		if !since.IsZero() { // the newest entry before since
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true})
			if before, ok := (pos{atOf(since), 0}).before(); ok {
				if it.Seek(indexKey(prefix, before)); it.Valid() {
					if p, ok := posOf(it.Item().Key(), len(prefix)); ok {
						lo = p.id
					}
				}
			}
			it.Close()
		}
		return nil
	})
	return lo, hi
}

// mergePages is one page of a listing from the queued webhooks' (a,
// where it stops ac) and the journal's (b, bc): newest first, each
// webhook once (the journal's entry, with its outcome, over the queue's
// record of it), no more than limit, and the cursor of the next page.
func mergePages(a []*Entry, ac Cursor, b []*Entry, bc Cursor, limit int, legacy bool) ([]*Entry, Cursor) {
	if len(a) == 0 && ac.IsZero() {
		return b, bc
	}
	inJournal := make(map[uint64]bool, len(b))
	for _, e := range b {
		inJournal[e.ID] = true
	}
	all := make([]*Entry, 0, len(a)+len(b))
	for _, e := range a {
		if !inJournal[e.ID] {
			all = append(all, e)
		}
	}
	all = append(all, b...)
	sortNewestFirst(all, legacy)
	// Both sources are complete down to the higher of their stops.
	var stop pos
	stopped := false
	for _, c := range []Cursor{ac, bc} {
		if c.IsZero() {
			continue
		}
		p := pos{c.At, c.ID}
		if legacy {
			p.at = 0
		}
		if !stopped || stop.less(p) {
			stop, stopped = p, true
		}
	}
	n := len(all)
	if stopped {
		n = 0
		for n < len(all) && !entryPos(all[n], legacy).less(stop) {
			n++
		}
	}
	if n > limit {
		return all[:limit], cursorAt(entryPos(all[limit], legacy))
	}
	if stopped {
		return all[:n], Cursor{At: stop.at, ID: stop.id}
	}
	return all, Cursor{}
}

func sortNewestFirst(es []*Entry, legacy bool) {
	for i := 1; i < len(es); i++ { // insertion: two sorted runs of a page each
		for k := i; k > 0 && entryPos(es[k-1], legacy).less(entryPos(es[k], legacy)); k-- {
			es[k-1], es[k] = es[k], es[k-1]
		}
	}
}

// queuedEntry is the entry of queued webhook id from the queue's record;
// ErrNotFound when it is not queued.
func (j *Journal) queuedEntry(id uint64) (*Entry, error) {
	j.mu.Lock()
	var ref laneRef
	ok := false
	if j.queued != nil {
		ref, ok = j.queued.find(id)
	}
	j.mu.Unlock()
	if ok {
		if m, err := j.st.Get(ref.host, ref.lane, id); err == nil {
			return entryFor(m), nil
		} else if !errors.Is(err, spool.ErrNotQueued) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%w: %s", ErrNotFound, spool.IDString(id))
}

// stillQueued reports whether the webhook of e, an entry without an
// outcome, is in the queue as txn sees it: then the queue lists it, not
// the journal (an accepted record or a coalesce note, written at ingest
// by an earlier release).
func (j *Journal) stillQueued(txn *badger.Txn, e *Entry) bool {
	_, ok := j.st.FindQueued(txn, e.Host, e.ID)
	return ok
}

package journal

// The journal's indexes: keys without a value, each ending in the
// entry's acceptance time and id, so that a listing reads newest first
// only the entries its filters select, and a time window is a range of
// keys:
//
//	dead/   x t <at:8> <id:8>                  every entry
//	dead/   x s <state> 0x00 <at:8> <id:8>     by state: its outcome, or "queued" while it has none
//	dead/   x h <host> 0x00 <at:8> <id:8>      by host
//	dead/   x i <key> 0x00 <at:8> <id:8>       by Idempotency-Key (its first maxIndexedKey bytes)
//
// at is the entry's Accepted in Unix nanoseconds, big-endian. An outcome
// writes t, h, i and s <outcome>, and deletes s queued for a webhook an
// earlier release gave an accepted record (those wrote t, h, i and s
// queued at ingest; a queued webhook now has no index keys: the queue
// lists it, queued.go); the sweep deletes all of them with the
// entry. They count toward the journal's bytes (Options.MaxBytes),
// about 100 bytes an entry. An index key whose entry is gone or says
// otherwise (a stale one) selects nothing: every entry read is checked
// against the query.
//
// A journal written before these indexes has them built once, in the
// background (index_build.go); until then List reads as it did
// (the host and outcome indexes by id, or a scan).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/internal/record"
	"github.com/hookpace/hookpace/spool"
)

const (
	prefixIndex = 'x'
	ixAll       = 't'
	ixState     = 's'
	ixHost      = 'h'
	ixIdem      = 'i'
)

// maxIndexedKey bounds the bytes of an Idempotency-Key its index keeps; a
// longer key is matched whole against the entries its first bytes find.
const maxIndexedKey = 200

// indexPrefix is the prefix of one index: of kind, for name (none for
// ixAll).
func indexPrefix(kind byte, name string) []byte {
	k := make([]byte, 0, 3+len(name)+16)
	k = append(k, prefixIndex, kind)
	if kind == ixAll {
		return k
	}
	if kind == ixIdem && len(name) > maxIndexedKey {
		name = name[:maxIndexedKey]
	}
	return append(append(k, name...), 0)
}

// pos is a place in an index: an acceptance time and an id.
type pos struct {
	at int64
	id uint64
}

// before is the place just before p, newest first; ok is false at the
// start of time.
func (p pos) before() (pos, bool) {
	switch {
	case p.id > 0:
		return pos{p.at, p.id - 1}, true
	case p.at > 0:
		return pos{p.at - 1, ^uint64(0)}, true
	}
	return pos{}, false
}

func atOf(t time.Time) int64 { return max(record.UnixNano(t), 0) }

func indexKey(prefix []byte, p pos) []byte {
	k := make([]byte, 0, len(prefix)+16)
	k = append(k, prefix...)
	k = binary.BigEndian.AppendUint64(k, uint64(p.at))
	return binary.BigEndian.AppendUint64(k, p.id)
}

func posOf(k []byte, prefix int) (pos, bool) {
	if len(k) != prefix+16 {
		return pos{}, false
	}
	return pos{int64(record.BeUint64(k[prefix:])), record.BeUint64(k[prefix+8:])}, true
}

func stateOf(e *Entry) string {
	if e.Outcome == "" {
		return spool.StateQueued
	}
	return e.Outcome
}

// entryIndex is every index key of e in its state, cut from one buffer:
// an outcome makes them for every webhook.
func entryIndex(e *Entry) [][]byte {
	p := pos{atOf(e.Accepted), e.ID}
	state := stateOf(e)
	idem := e.Idempotency
	if len(idem) > maxIndexedKey {
		idem = idem[:maxIndexedKey]
	}
	n := 4 * (3 + 16) // each key: prefix, kind, (name, 0), position
	n += len(e.Host) + len(state)
	if idem != "" {
		n += len(idem)
	}
	buf := make([]byte, 0, n)
	keys := make([][]byte, 0, 4)
	add := func(kind byte, name string) {
		start := len(buf)
		buf = append(buf, prefixIndex, kind)
		if kind != ixAll {
			buf = append(append(buf, name...), 0)
		}
		buf = binary.BigEndian.AppendUint64(buf, uint64(p.at))
		buf = binary.BigEndian.AppendUint64(buf, p.id)
		keys = append(keys, buf[start:len(buf):len(buf)])
	}
	add(ixAll, "")
	add(ixHost, e.Host)
	add(ixState, state)
	if idem != "" {
		add(ixIdem, idem)
	}
	return keys
}

// queuedIndexKey is e's key in the index of queued entries.
func queuedIndexKey(e *Entry) []byte {
	return indexKey(indexPrefix(ixState, spool.StateQueued), pos{atOf(e.Accepted), e.ID})
}

func keysLen(keys [][]byte) (n int64) {
	for _, k := range keys {
		n += int64(len(k))
	}
	return n
}

// Cursor is where the next page of a listing starts: the entries before
// it, newest first. The zero Cursor is the start (or, returned, the end).
// A Cursor with At 0 is an id alone, as listings before the indexes made.
type Cursor struct {
	At int64
	ID uint64
}

// cursorAt is the cursor of the listing that goes on at p: the entries
// at p and before it.
func cursorAt(p pos) Cursor {
	if p.id == ^uint64(0) {
		return Cursor{At: p.at + 1}
	}
	return Cursor{At: p.at, ID: p.id + 1}
}

// IsZero reports whether c is no cursor.
func (c Cursor) IsZero() bool { return c == Cursor{} }

// queryTime bounds the time one page of a listing reads: a search that
// finds few entries stops, and says where (the cursor), rather than make
// its caller wait. It is checked every queryCheck entries read, once
// queryCheck of them did not match: a listing whose index selects what
// it shows (most do) fills its page, and a small journal's is never cut.
const (
	queryTime  = 50 * time.Millisecond
	queryCheck = 32
)

// listIndexed is List from the indexes: the one q's filters select the
// fewest entries of (the idempotency key's; else the host's and the
// state's together, leapfrogging; else all), newest first, between
// q.Until and q.Since.
func (j *Journal) listIndexed(txn *badger.Txn, q *Query, out *[]*Entry) (Cursor, error) {
	var prefixes [][]byte
	switch {
	case q.Idempotency != "":
		prefixes = append(prefixes, indexPrefix(ixIdem, q.Idempotency))
	default:
		if q.Host != "" {
			prefixes = append(prefixes, indexPrefix(ixHost, q.Host))
		}
		if q.State != "" {
			prefixes = append(prefixes, indexPrefix(ixState, q.State))
		}
		if len(prefixes) == 0 {
			prefixes = append(prefixes, indexPrefix(ixAll, ""))
		}
	}
	its := make([]*badger.Iterator, len(prefixes))
	for i, p := range prefixes {
		its[i] = txn.NewIterator(badger.IteratorOptions{Prefix: p, Reverse: true})
		defer its[i].Close()
	}
	cur, ok := j.listStart(txn, q)
	if !ok {
		return Cursor{}, nil
	}
	began := time.Now()
	w := walk{its: its, prefixes: prefixes, deadline: began.Add(queryTime)}
	since := atOf(q.Since)
	scanned := 0
	for {
		p, ok := w.next(cur)
		if w.late { // everything after p is read
			return cursorAt(p), nil
		}
		if !ok || p.at < since {
			return Cursor{}, nil
		}
		if scanned == queryScanMax ||
			scanned-len(*out) >= queryCheck && scanned%queryCheck == queryCheck-1 && time.Since(began) > queryTime {
			return cursorAt(p), nil
		}
		scanned++
		if item, err := txn.Get(journalKey(p.id)); err == nil {
			if e, ok := j.matchItem(txn, q, p.id, item); ok {
				if len(*out) == q.Limit {
					return cursorAt(p), nil // the next page starts with this one
				}
				*out = append(*out, e)
			}
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return Cursor{}, err
		}
		if cur, ok = p.before(); !ok {
			return Cursor{}, nil
		}
	}
}

// listStart is the place a listing starts at: the newest entry before q.Before
// and q.Until; ok is false when there is none.
func (j *Journal) listStart(txn *badger.Txn, q *Query) (pos, bool) {
	cur := pos{int64(^uint64(0) >> 1), ^uint64(0)}
	if !q.Until.IsZero() {
		if u, ok := (pos{atOf(q.Until), 0}).before(); !ok {
			return pos{}, false
		} else if u.at < cur.at {
			cur = u
		}
	}
	if b := q.Before; !b.IsZero() {
		if b.At == 0 { // an id alone: the place of that id's entry, if any
			if item, err := txn.Get(journalKey(b.ID - 1)); err == nil {
				item.Value(func(v []byte) error {
					if e, err := decodeEntryHead(b.ID-1, v); err == nil {
						b.At = atOf(e.Accepted)
					}
					return nil
				})
			}
		}
		if p, ok := (pos{b.At, b.ID}).before(); !ok {
			return pos{}, false
		} else if p.at < cur.at || p.at == cur.at && p.id < cur.id {
			cur = p
		}
	}
	return cur, true
}

// walk goes through the places that every one of its iterators holds,
// newest first.
type walk struct {
	its      []*badger.Iterator
	prefixes [][]byte
	started  bool
	// deadline bounds a leapfrog's seeks; late says it ended one there,
	// at the place next returned.
	deadline time.Time
	late     bool
}

// next is the newest place at or before cur that every iterator holds
// (cur the place just before the last one next returned, if any).
func (w *walk) next(cur pos) (pos, bool) {
	if len(w.its) == 1 && w.started { // one index: its next key
		it := w.its[0]
		it.Next()
		if !it.Valid() {
			return pos{}, false
		}
		return posOf(it.Item().Key(), len(w.prefixes[0]))
	}
	w.started = true
	return w.leapfrog(cur)
}

// leapfrog finds the newest place at or before cur that every iterator
// (over the index with the prefix of the same number) holds: each seeks
// to the place the last one found, until all of them agree, or until the
// deadline.
func (w *walk) leapfrog(cur pos) (pos, bool) {
	its, prefixes := w.its, w.prefixes
	agreed := 0 // iterators in a row that hold cur
	for i, n := 0, 0; agreed < len(its); i, n = (i+1)%len(its), n+1 {
		if n%queryCheck == queryCheck-1 && time.Now().After(w.deadline) {
			w.late = true
			return cur, false
		}
		its[i].Seek(indexKey(prefixes[i], cur))
		if !its[i].Valid() {
			return pos{}, false
		}
		p, ok := posOf(its[i].Item().Key(), len(prefixes[i]))
		if !ok {
			return pos{}, false
		}
		if p == cur {
			agreed++
		} else { // older: the others must reach it
			cur, agreed = p, 1
		}
	}
	return cur, true
}

// String is c as a listing's cursor: "AT.ID" in hex, or an id alone.
func (c Cursor) String() string {
	if c.IsZero() {
		return ""
	}
	if c.At == 0 {
		return strconv.FormatUint(c.ID, 16)
	}
	return strconv.FormatInt(c.At, 16) + "." + strconv.FormatUint(c.ID, 16)
}

// ParseCursor reads a cursor as String writes it.
func ParseCursor(s string) (Cursor, error) {
	at, id, found := strings.Cut(s, ".")
	if !found {
		at, id = "", at
	}
	var c Cursor
	var err error
	if c.ID, err = strconv.ParseUint(id, 16, 64); err != nil {
		return Cursor{}, fmt.Errorf("bad cursor %q", s)
	}
	if found {
		if c.At, err = strconv.ParseInt(at, 16, 64); err != nil || c.At < 0 {
			return Cursor{}, fmt.Errorf("bad cursor %q", s)
		}
	}
	return c, nil
}

package spool

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/internal/record"
)

// Read returns up to max queued messages of host's lane Lane{} (webhooks
// without a fairness key or priority) with ids above after, in FIFO
// order. ReadHost reads every lane.
func (s *Spool) Read(host string, after uint64, max int) ([]*Message, error) {
	return s.ReadLane(host, Lane{}, after, max)
}

// ReadLane returns up to max queued messages of lane l of host's with ids
// above after, in FIFO (id) order. It seeks straight to the lane: other
// lanes' backlogs are never read.
func (s *Spool) ReadLane(host string, l Lane, after uint64, max int) ([]*Message, error) {
	out, _, err := s.readLane(host, l, after, max)
	return out, err
}

// noPrefetch: the lane reads iterate without PrefetchValues. Badger
// prefetches each value on a goroutine of its own, which a replay pays
// for with one goroutine per webhook read, runnable behind every
// delivery on a busy machine while the read waits for all of them; the
// records are small and mostly inline in the LSM tree, and decodeQueued
// copies what it keeps, so reading each value in place costs less.

// readLane is ReadLane, also saying how many keys it visited.
func (s *Spool) readLane(host string, l Lane, after uint64, max int) ([]*Message, int, error) {
	prefix := queuePrefix(host)
	if l != (Lane{}) {
		prefix = lanePrefix(host, l)
	}
	var out []*Message
	visited := 0
	// The newest version of every key, as DB.View reads in managed mode.
	// Reading at an older timestamp would not be safe: versions at or
	// below the discard timestamp that a newer one shadows may already be
	// compacted away. A message a round is still writing may show up
	// before it is synced and announced; the dispatcher's cursor keeps it
	// from being taken twice; one above shown (a round whose replica may
	// still refuse it) does not: the lane's ids go up, so it ends the read.
	shown := s.shown.Load()
	txn := s.queue.NewTransactionAt(math.MaxUint64, false)
	defer txn.Discard()
	io := badger.IteratorOptions{Prefix: prefix} // values read in place (noPrefetch)
	it := txn.NewIterator(io)
	defer it.Close()
	for it.Seek(laneKey(host, l, after+1)); it.Valid() && len(out) < max; it.Next() {
		visited++
		item := it.Item()
		if len(item.Key()) != len(prefix)+8 {
			continue
		}
		id := record.BeUint64(item.Key()[len(prefix):])
		if id > shown {
			break
		}
		m, err := s.decodeQueued(host, l, id, item)
		if errors.Is(err, errUnreadable) {
			continue // removed: it never stops the others (dropUnreadable)
		}
		if err != nil {
			return out, visited, err
		}
		out = append(out, m)
	}
	return out, visited, nil
}

// decodeQueued decodes the queued record item of message id, found in
// lane l of host's. One whose value cannot be read it removes from the
// queue (dropUnreadable) and reports with an error wrapping errUnreadable.
func (s *Spool) decodeQueued(host string, l Lane, id uint64, item *badger.Item) (*Message, error) {
	var m *Message
	err := item.Value(func(v []byte) error {
		if len(v) == 0 {
			// No record is empty: Badger read nothing where the key points.
			return errUnreadable
		}
		var err error
		m, err = decodeMessage(host, id, v)
		if err != nil {
			return err
		}
		if m.Lane() != l {
			// Deleting it would remove another key: refuse it instead.
			return fmt.Errorf("message %s: its record's lane is not its key's: %w", IDString(id), errCorrupt)
		}
		m.size = m.storedSize(v)
		m.Spool = s.instance
		return nil
	})
	if errors.Is(err, errUnreadable) {
		s.dropUnreadable(host, l, id, item)
		return nil, fmt.Errorf("message %s: %w", IDString(id), err)
	}
	return m, err
}

// errUnreadable: a queued record's value is not on disk. A record whose
// value went to the value log is a pointer into it in the memtable's log
// (WAL), and a round syncs the value log before the WAL (logSync.sync;
// Badger's SyncWrites the same); but a power cut during a round may find
// the round's WAL page written back and not its value-log page, and the
// pointer then points past the value log's end, which Badger reads as an
// empty value (logging the error). Such a record is of a round that never
// completed its sync: its webhooks were never acknowledged.
var errUnreadable = errors.New("corrupt record: unreadable after a crash")

// dropUnreadable removes the queued record item of message id, in lane l
// of host's, whose value cannot be read (errUnreadable): for good, with
// the journal's outcome purged and the reason, and an error in the log,
// once. What the record held is lost; its key says its host, lane and id.
func (s *Spool) dropUnreadable(host string, l Lane, id uint64, item *badger.Item) {
	if _, dropping := s.unreadable.LoadOrStore(id, true); dropping {
		return
	}
	if s.readsWhole(item.KeyCopy(nil)) {
		s.unreadable.Delete(id)
		return // moved, not lost: the caller's next read finds it
	}
	s.log.Error("spool: a queued record cannot be read (its value is missing after a crash): removing it",
		"host", host, "fairness_key", l.Key, "priority", l.Priority.String(), "id", IDString(id), "key", fmt.Sprintf("%q", item.Key()))
	m := &Message{ID: id, Host: host, Fairness: l.Key, Priority: l.Priority, Spool: s.instance}
	// As counted at open: Badger's estimate of the record's size and its key.
	size := item.ValueSize() + int64(len(item.Key()))
	done := make(chan error, 1)
	err := s.submit(&dropOp{opBase: opBase{msg: m, done: done}, old: size, by: errUnreadable.Error()})
	if err != nil {
		s.unreadable.Delete(id) // the next read tries again
		return
	}
	go func() {
		if <-done != nil {
			s.unreadable.Delete(id)
		}
	}()
}

// readsWhole reports whether key's value reads whole now. Badger reads an
// empty value, and only logs why, also where value-log GC moved a record
// and deleted its old file between a lookup and the read of its value
// (Badger defers that deletion only while an iterator is open). A new
// transaction finds the record where GC put it, and its iterator keeps
// any GC from deleting a file under this read.
func (s *Spool) readsWhole(key []byte) bool {
	txn := s.queue.NewTransactionAt(math.MaxUint64, false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{Prefix: key})
	defer it.Close()
	it.Seek(key)
	if !it.Valid() || !bytes.Equal(it.Item().Key(), key) {
		return false
	}
	whole := false
	it.Item().Value(func(v []byte) error {
		whole = len(v) > 0
		return nil
	})
	return whole
}

// Get returns queued message id of lane l of host's, or an error wrapping
// ErrNotQueued when it is no longer queued (or never was, there).
func (s *Spool) Get(host string, l Lane, id uint64) (*Message, error) {
	shown := s.shown.Load()
	txn := s.queue.NewTransactionAt(math.MaxUint64, false) // the newest version, as Read
	defer txn.Discard()
	item, err := txn.Get(laneKey(host, l, id))
	if errors.Is(err, badger.ErrKeyNotFound) || err == nil && id > shown {
		return nil, fmt.Errorf("message %s: %w", IDString(id), ErrNotQueued)
	}
	if err != nil {
		return nil, err
	}
	m, err := s.decodeQueued(host, l, id, item)
	if errors.Is(err, errUnreadable) {
		return nil, fmt.Errorf("%w: %w", err, ErrNotQueued)
	}
	return m, err
}

// HostCursor is where ReadHost stopped: its zero value is the start of a
// host's queue.
type HostCursor struct {
	// Lane and After: the last message read was After, of Lane.
	Lane  Lane
	After uint64
	laned bool // past lane Lane{}: Lane is a lane key's lane
}

// ReadHost returns up to max messages of host's whole queue, every lane,
// from cursor after on, and the cursor to read on from. It reads lane
// Lane{} first, then the other lanes in the order of their keys (fairness
// key, then priority rank), each in id order: not the order they were
// queued in, nor the order they are delivered in. Fewer than max messages
// means the end of the queue. For views of a host's whole queue (a list,
// a purge, a hand-off); the dispatcher reads lane by lane (ReadLane).
func (s *Spool) ReadHost(host string, after HostCursor, max int) ([]*Message, HostCursor, error) {
	var out []*Message
	if !after.laned {
		ms, err := s.ReadLane(host, Lane{}, after.After, max)
		if err != nil {
			return ms, after, err
		}
		out = ms
		if n := len(ms); n > 0 {
			after.After = ms[n-1].ID
		}
		if len(out) == max {
			return out, after, nil
		}
		after = HostCursor{laned: true}
	}
	ms, err := s.readLanes(host, after, max-len(out))
	out = append(out, ms...)
	if n := len(ms); n > 0 {
		after = HostCursor{Lane: ms[n-1].Lane(), After: ms[n-1].ID, laned: true}
	}
	return out, after, err
}

// readLanes reads up to max messages of host's lanes other than Lane{},
// in key order, after cursor c (laned).
func (s *Spool) readLanes(host string, c HostCursor, max int) ([]*Message, error) {
	var out []*Message
	shown := s.shown.Load() // ids above it are not read (readLane)
	txn := s.queue.NewTransactionAt(math.MaxUint64, false)
	defer txn.Discard()
	io := badger.IteratorOptions{Prefix: laneHostPrefix(host)} // values read in place (noPrefetch)
	it := txn.NewIterator(io)
	defer it.Close()
	start := io.Prefix
	if c.Lane != (Lane{}) {
		start = laneKey(host, c.Lane, c.After+1)
	}
	for it.Seek(start); it.Valid() && len(out) < max; it.Next() {
		item := it.Item()
		h, l, id, ok := parseLaneKey(item.Key())
		if !ok || h != host || id > shown {
			continue
		}
		m, err := s.decodeQueued(host, l, id, item)
		if errors.Is(err, errUnreadable) {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
	return out, nil
}

// findQueued finds which lane of host's message id is queued in, if it is:
// the journal does not keep a webhook's lane. It looks in Lane{}, then in
// each lane that has webhooks queued (from memory): a point read each.
func (s *Spool) findQueued(txn *badger.Txn, host string, id uint64) (Lane, bool) {
	if _, err := txn.Get(queueKey(host, id)); err == nil {
		return Lane{}, true
	}
	for _, u := range s.Lanes(host) {
		if u.Lane == (Lane{}) {
			continue
		}
		if _, err := txn.Get(laneKey(host, u.Lane, id)); err == nil {
			return u.Lane, true
		}
	}
	return Lane{}, false
}

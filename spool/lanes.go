package spool

import (
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
	// from being taken twice.
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
		m, err := s.decodeQueued(host, l, record.BeUint64(item.Key()[len(prefix):]), item)
		if err != nil {
			return out, visited, err
		}
		out = append(out, m)
	}
	return out, visited, nil
}

// decodeQueued decodes the queued record item of message id, found in
// lane l of host's.
func (s *Spool) decodeQueued(host string, l Lane, id uint64, item *badger.Item) (*Message, error) {
	var m *Message
	err := item.Value(func(v []byte) error {
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
	return m, err
}

// Get returns queued message id of lane l of host's, or an error wrapping
// ErrNotQueued when it is no longer queued (or never was, there).
func (s *Spool) Get(host string, l Lane, id uint64) (*Message, error) {
	txn := s.queue.NewTransactionAt(math.MaxUint64, false) // the newest version, as Read
	defer txn.Discard()
	item, err := txn.Get(laneKey(host, l, id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, fmt.Errorf("message %s: %w", IDString(id), ErrNotQueued)
	}
	if err != nil {
		return nil, err
	}
	return s.decodeQueued(host, l, id, item)
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
		if !ok || h != host {
			continue
		}
		m, err := s.decodeQueued(host, l, id, item)
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

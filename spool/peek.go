package spool

import (
	"errors"
	"maps"
	"math"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/internal/record"
)

// Oldest returns when host's oldest queued message was enqueued, and false
// when host has nothing queued. It reads the first key of each of host's
// lanes and the head of its record (not the body): a lane is in id order,
// and ids increase with every append, so the first key of a lane is its
// oldest message. (A replayed dead letter keeps its arrival time under a
// new id: as before lanes, it does not count as its lane's oldest.)
func (s *Spool) Oldest(host string) (time.Time, bool, error) {
	// The newest version, as Read; no id above shown (readLane).
	shown := s.shown.Load()
	txn := s.queue.NewTransactionAt(math.MaxUint64, false)
	defer txn.Discard()
	prefixes := [][]byte{queuePrefix(host)}
	for _, u := range s.Lanes(host) {
		if u.Lane != (Lane{}) {
			prefixes = append(prefixes, lanePrefix(host, u.Lane))
		}
	}
	var oldest time.Time
	found := false
	for _, p := range prefixes {
		at, ok, err := firstEnqueued(txn, p, shown)
		if err != nil {
			return time.Time{}, false, err
		}
		if ok && (!found || at.Before(oldest)) {
			oldest, found = at, true
		}
	}
	return oldest, found, nil
}

// firstEnqueued reads the enqueue time of the first message under prefix,
// a lane's, with an id up to shown.
func firstEnqueued(txn *badger.Txn, prefix []byte, shown uint64) (time.Time, bool, error) {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		if len(item.Key()) != len(prefix)+8 {
			continue
		}
		if record.BeUint64(item.Key()[len(prefix):]) > shown {
			break
		}
		var at time.Time
		err := item.Value(func(v []byte) error {
			if len(v) == 0 {
				return errUnreadable // the next read removes it (decodeQueued)
			}
			var err error
			at, err = decodeEnqueued(v)
			return err
		})
		if errors.Is(err, errUnreadable) {
			continue
		}
		return at, err == nil, err
	}
	return time.Time{}, false, nil
}

// decodeEnqueued reads the enqueue time from the head of a queue record.
func decodeEnqueued(b []byte) (time.Time, error) {
	d := record.Decoder{B: b}
	if !readVersion(&d, &Message{}) {
		return time.Time{}, errCorrupt
	}
	d.Bytes() // method
	d.Bytes() // URL
	t := d.Varint()
	if d.Err != nil {
		return time.Time{}, d.Err
	}
	return time.Unix(0, t), nil
}

// DeadByHost counts the dead letters of each host, from the counts the
// spool keeps (read from every dead letter when it opened).
func (s *Spool) DeadByHost() (map[string]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.ledger.deadHosts), nil
}

// deadHost reads the host from the head of a dead letter's record.
func deadHost(v []byte) (string, error) {
	d := record.Decoder{B: v}
	if ver := d.Byte(); ver != encodingVersion {
		return "", errCorrupt
	}
	host := d.Str()
	return host, d.Err
}

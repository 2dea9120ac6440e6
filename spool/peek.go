package spool

import (
	"maps"
	"math"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// Oldest returns when host's oldest queued message was enqueued, and false
// when host has nothing queued. It reads one key and the head of its
// record (not the body): the queue is in id order, and ids increase with
// every append, so the first key of a host's prefix is its oldest message.
func (s *Spool) Oldest(host string) (time.Time, bool, error) {
	txn := s.queue.NewTransactionAt(math.MaxUint64, false) // the newest version, as Read
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{Prefix: queuePrefix(host)})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		_, id, ok := parseQueueKey(item.Key())
		if !ok {
			continue
		}
		var at time.Time
		err := item.Value(func(v []byte) error {
			var err error
			at, err = decodeEnqueued(id, v)
			return err
		})
		return at, err == nil, err
	}
	return time.Time{}, false, nil
}

// decodeEnqueued reads the enqueue time from the head of a queue record.
func decodeEnqueued(id uint64, b []byte) (time.Time, error) {
	d := decoder{b: b}
	var origin, originSpool uint64
	if !d.version(&origin, &originSpool) {
		return time.Time{}, errCorrupt
	}
	d.bytes() // method
	d.bytes() // URL
	t := d.varint()
	if d.err != nil {
		return time.Time{}, d.err
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
	d := decoder{b: v}
	if ver := d.byte(); ver != encodingVersion {
		return "", errCorrupt
	}
	host := d.string()
	return host, d.err
}

package spool

import (
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
)

// SetPaused records durably that an operator paused host (or resumed it),
// so that a pause outlives a restart: a partner that asked for a break
// must not get the whole backlog because the sidecar was rescheduled.
//
// The record is a write into the kept database's memory-mapped log, where
// a page the file system can no longer give is a SIGBUS, not an error: with
// less free space than removals wait for (hold.go), it is not written, and
// the error wraps ErrDiskFull.
func (s *Spool) SetPaused(host string, paused bool) error {
	key := append([]byte{prefixPaused}, host...)
	if room, limited := s.headroomNow(); limited && room+s.opts.MinFree < int64(holdBelow+len(key)+64) {
		return fmt.Errorf("record pause of %s: %w", host, ErrDiskFull)
	}
	err := s.kept.Update(func(txn *badger.Txn) error {
		if paused {
			return txn.Set(key, nil)
		}
		return txn.Delete(key)
	})
	if err == nil {
		err = s.syncKept(false)
	}
	if err != nil {
		return fmt.Errorf("record pause of %s: %w", host, err)
	}
	return nil
}

// Paused lists the hosts recorded as paused, in byte order.
func (s *Spool) Paused() ([]string, error) {
	var hosts []string
	err := s.kept.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixPaused}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			hosts = append(hosts, string(it.Item().Key()[1:]))
		}
		return nil
	})
	return hosts, err
}

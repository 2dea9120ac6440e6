package spool

import (
	"errors"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// keyJournalFrom holds the first id the journal may know: ids at or below
// it were queued before this spool kept a journal (a spool written by an
// earlier release), and Open does not look for their entries.
var keyJournalFrom = []byte("jfrom")

// openJournal counts what the journal holds and writes the entries a
// crash left out: messages queued in the last round before it, whose
// accepted records were to go with the next.
func (s *Spool) openJournal() error {
	if s.opts.Journal.Off {
		return nil
	}
	var from, last uint64
	found := false
	err := s.kept.View(func(txn *badger.Txn) error {
		if item, err := txn.Get(keyJournalFrom); err == nil {
			found = true
			return item.Value(func(v []byte) error {
				if len(v) == 8 {
					from = beUint64(v)
				}
				return nil
			})
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !found {
		// The first start with a journal: what is queued already has no
		// history to recover.
		from = s.seq
		if err := s.kept.Update(func(txn *badger.Txn) error { return txn.Set(keyJournalFrom, be64(from)) }); err != nil {
			return err
		}
	}
	s.jr.from = from
	if err := s.indexOutcomes(); err != nil {
		return fmt.Errorf("index the journal's outcomes: %w", err)
	}
	if err := s.openIndex(); err != nil {
		return fmt.Errorf("open the journal's indexes: %w", err)
	}
	if last, err = s.countJournal(); err != nil {
		return err
	}
	if err := s.recoverJournal(max(from, last)); err != nil {
		return err
	}
	s.startIndexBuild()
	return nil
}

// countJournal adds up the journal's entries and bytes, reading keys only,
// and returns the highest id with an entry.
func (s *Spool) countJournal() (last uint64, err error) {
	var bytes, entries int64
	err = s.kept.View(func(txn *badger.Txn) error {
		for _, p := range []byte{prefixJournal, prefixAttempt, prefixHostIndex, prefixOutcomeIndex, prefixIndex} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{p}})
			for it.Rewind(); it.Valid(); it.Next() {
				item := it.Item()
				bytes += int64(len(item.Key())) + item.ValueSize()
				if p == prefixJournal && len(item.Key()) == 9 {
					entries++
					last = max(last, beUint64(item.Key()[1:]))
				}
			}
			it.Close()
		}
		return nil
	})
	s.jr.bytes.Store(bytes)
	s.jr.entries.Store(entries)
	return last, err
}

// recoverJournal writes the accepted records of the queued messages with
// ids above after.
func (s *Spool) recoverJournal(after uint64) error {
	var recs []journalRec
	err := s.queue.View(func(txn *badger.Txn) error {
		for _, p := range []byte{prefixQueue, prefixLane} { // every lane
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{p}})
			err := recoverFrom(it, after, &recs)
			it.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || len(recs) == 0 {
		return err
	}
	s.log.Info("spool: journal entries written for webhooks queued just before a crash", "count", len(recs))
	return s.writeJournal(recs)
}

// recoverFrom adds to recs the accepted records of the messages of it,
// queue or lane keys, with ids above after.
func recoverFrom(it *badger.Iterator, after uint64, recs *[]journalRec) error {
	for it.Rewind(); it.Valid(); it.Next() {
		host, _, id, ok := parseAnyKey(it.Item().Key())
		if !ok || id <= after {
			continue
		}
		err := it.Item().Value(func(v []byte) error {
			m, err := decodeMessage(host, id, v)
			if err == nil {
				*recs = append(*recs, acceptedRec(m))
			}
			return nil // one that cannot be read stays without history
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// JournalUsage is what the journal holds, against its budget.
type JournalUsage struct {
	Entries  int64         `json:"entries"`
	Bytes    int64         `json:"bytes"`
	MaxBytes int64         `json:"max_bytes"`
	Retain   time.Duration `json:"retain_ns"`
	Off      bool          `json:"off,omitempty"`
}

// JournalUsage says what the journal holds.
func (s *Spool) JournalUsage() JournalUsage {
	j := s.opts.Journal
	return JournalUsage{Entries: s.jr.entries.Load(), Bytes: s.jr.bytes.Load(), MaxBytes: j.MaxBytes, Retain: j.Retain, Off: j.Off}
}

// sweepJournalMax bounds the entries one sweep removes, so that a sweep
// holds no transaction for long.
const sweepJournalMax = 10000

// SweepJournal removes the oldest entries that have an outcome, with
// their attempts, while they are older than JournalOptions.Retain or the
// journal is over its MaxBytes. An entry still queued stays. It returns
// how many it removed; the spool runs it every 30 seconds.
func (s *Spool) SweepJournal(now time.Time) (int, error) {
	if s.opts.Journal.Off {
		return 0, nil
	}
	cutoff := now.Add(-s.opts.Journal.Retain)
	over := s.jr.bytes.Load() - s.opts.Journal.MaxBytes
	var dels [][]byte
	var freed, entries int64
	legacy := !s.jr.indexed.Load() // the build deletes the rest
	err := s.kept.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixJournal}, PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		for it.Rewind(); it.Valid() && entries < sweepJournalMax; it.Next() {
			item := it.Item()
			if len(item.Key()) != 9 {
				continue
			}
			id := beUint64(item.Key()[1:])
			var e *Entry
			if err := item.Value(func(v []byte) (err error) { e, err = decodeEntry(id, v); return err }); err != nil {
				continue
			}
			old := e.Accepted.Before(cutoff)
			if !old && freed >= over {
				break // ids follow acceptance: the rest are younger
			}
			if e.Outcome == "" {
				continue
			}
			dels = append(dels, item.KeyCopy(nil), queuedIndexKey(e))
			ix := entryIndex(e)
			dels = append(dels, ix...)
			freed += int64(len(item.Key())) + item.ValueSize() + keysLen(ix)
			if legacy {
				dels = append(dels, hostIndexKey(e.Host, id), outcomeIndexKey(e.Outcome, id))
				freed += int64(len(e.Host)+10) + int64(len(e.Outcome)+10)
			}
			entries++
			freed += s.attemptKeys(txn, id, &dels)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if err := s.deleteKept(dels); err != nil {
		return 0, err
	}
	s.jr.bytes.Add(-freed)
	s.jr.entries.Add(-entries)
	return int(entries), nil
}

// attemptKeys appends the keys of id's attempts to dels and returns their
// bytes.
func (s *Spool) attemptKeys(txn *badger.Txn, id uint64, dels *[][]byte) int64 {
	var n int64
	it := txn.NewIterator(badger.IteratorOptions{Prefix: attemptPrefix(id)})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		*dels = append(*dels, it.Item().KeyCopy(nil))
		n += int64(len(it.Item().Key())) + it.Item().ValueSize()
	}
	return n
}

// deleteKept deletes keys from the kept database, in as few transactions
// as Badger allows.
func (s *Spool) deleteKept(keys [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	wb := s.kept.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return err
		}
	}
	return wb.Flush()
}

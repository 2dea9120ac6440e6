package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/internal/record"
)

// keyJournalAccepted holds the highest id a hookpace that wrote an
// accepted record at ingest may have given: the entries of those ids
// still queued have one (with its index keys), which the outcome replaces.
// Ids above it have no entry until they leave the queue.
var keyJournalAccepted = []byte("jacc")

// openJournal counts what the journal holds, and marks the ids above
// which no webhook has an accepted record.
func (j *Journal) openJournal() error {
	if j.opts.Off {
		return nil
	}
	found := false
	err := j.kept.View(func(txn *badger.Txn) error {
		item, err := txn.Get(keyJournalAccepted)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		found = true
		return item.Value(func(v []byte) error {
			if len(v) == 8 {
				j.acceptedUpTo = record.BeUint64(v)
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	if !found {
		// The first start of a hookpace that writes no accepted record:
		// every id given so far may have one.
		j.acceptedUpTo = j.st.SeqLocked()
		if err := j.kept.Update(func(txn *badger.Txn) error {
			return txn.Set(keyJournalAccepted, binary.BigEndian.AppendUint64(nil, j.acceptedUpTo))
		}); err != nil {
			return err
		}
	}
	if err := j.indexOutcomes(); err != nil {
		return fmt.Errorf("index the journal's outcomes: %w", err)
	}
	if err := j.openIndex(); err != nil {
		return fmt.Errorf("open the journal's indexes: %w", err)
	}
	if _, err := j.countJournal(); err != nil {
		return err
	}
	if err := j.buildQueuedIndex(); err != nil {
		return fmt.Errorf("index the queued webhooks: %w", err)
	}
	if err := j.takeAhead(); err != nil {
		return err
	}
	j.startIndexBuild()
	return nil
}

// countJournal adds up the journal's entries and bytes, reading keys only,
// and returns the highest id with an entry.
func (j *Journal) countJournal() (last uint64, err error) {
	var bytes, entries, oldest int64
	trim := scanTrim{st: j.st}
	err = j.kept.View(func(txn *badger.Txn) error {
		for _, p := range []byte{prefixJournal, prefixAttempt, prefixHostIndex, prefixOutcomeIndex, prefixIndex} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{p}})
			for it.Rewind(); it.Valid(); it.Next() {
				trim.step()
				item := it.Item()
				bytes += int64(len(item.Key())) + item.ValueSize()
				if k := item.Key(); p == prefixIndex && oldest == 0 && len(k) == 18 && k[1] == ixAll {
					oldest = int64(record.BeUint64(k[2:]))
				}
				if p == prefixJournal && len(item.Key()) == 9 {
					entries++
					last = max(last, record.BeUint64(item.Key()[1:]))
				}
			}
			it.Close()
		}
		return nil
	})
	j.bytes.Store(bytes)
	j.entries.Store(entries)
	j.oldest.Store(oldest)
	return last, err
}

// Usage is what the journal holds, against its budget.
type Usage struct {
	Entries  int64         `json:"entries"`
	Bytes    int64         `json:"bytes"`
	MaxBytes int64         `json:"max_bytes"`
	Retain   time.Duration `json:"retain_ns"`
	Off      bool          `json:"off,omitempty"`
	// Measured from the journal itself, once it spans minRateSpan and
	// holds minRateEntries: the webhooks a second it took in over the
	// span of its entries, the bytes an entry takes, how long MaxBytes
	// keeps entries at that rate (Holds), and which of max_bytes and
	// retain ends an entry's stay (Binds: "max_bytes" when Holds is
	// shorter than Retain, else "retain").
	Rate          float64       `json:"rate_per_s,omitempty"`
	BytesPerEntry int64         `json:"bytes_per_entry,omitempty"`
	Holds         time.Duration `json:"max_bytes_holds_ns,omitempty"`
	Binds         string        `json:"binds,omitempty"`
}

// What the journal's rate is measured over, at least.
const (
	minRateSpan    = 10 * time.Minute
	minRateEntries = 100
)

// NominalEntryBytes is about what an entry takes, with its index keys:
// a webhook delivered at once, a few request headers, its answer's first
// bytes. Attempts, long URLs and kept bodies take more; check-config says
// what max_bytes holds at this size, the status page at the measured one.
const NominalEntryBytes = 590

// JournalUsage says what the journal holds.
func (j *Journal) JournalUsage() Usage {
	o := j.opts
	u := Usage{Entries: j.entries.Load(), Bytes: j.bytes.Load(), MaxBytes: o.MaxBytes, Retain: o.Retain, Off: o.Off}
	oldest := j.oldest.Load()
	span := j.now().Sub(time.Unix(0, oldest))
	if o.Off || oldest == 0 || span < minRateSpan || u.Entries < minRateEntries || u.Bytes <= 0 {
		return u
	}
	u.Rate = float64(u.Entries) / span.Seconds()
	u.BytesPerEntry = u.Bytes / u.Entries
	u.Holds, u.Binds = BindingLimit(o.MaxBytes, o.Retain, u.BytesPerEntry, u.Rate)
	return u
}

// BindingLimit says how long maxBytes keeps entries of perEntry bytes
// coming at rate a second, and which of "max_bytes" and "retain" ends
// their stay.
func BindingLimit(maxBytes int64, retain time.Duration, perEntry int64, rate float64) (time.Duration, string) {
	if rate <= 0 || perEntry <= 0 {
		return 0, "retain"
	}
	secs := float64(maxBytes) / (float64(perEntry) * rate)
	if secs >= retain.Seconds() {
		return retain, "retain"
	}
	return time.Duration(secs * float64(time.Second)), "max_bytes"
}

// sweepJournalMax bounds the entries one sweep removes, so that a sweep
// holds no transaction for long.
const sweepJournalMax = 10000

// SweepJournal removes the oldest entries that have an outcome, with
// their attempts, while they are older than Options.Retain or the
// journal is over its MaxBytes. An entry still queued stays. It returns
// how many it removed; sweepLoop runs it every sweepEvery.
func (j *Journal) SweepJournal(now time.Time) (int, error) {
	if j.opts.Off {
		return 0, nil
	}
	cutoff := now.Add(-j.opts.Retain)
	over := j.bytes.Load() - j.opts.MaxBytes
	var dels [][]byte
	var freed, entries, young, oldest int64
	legacy := !j.indexed.Load() // the build deletes the rest
	err := j.kept.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixJournal}, PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		for it.Rewind(); it.Valid() && entries < sweepJournalMax; it.Next() {
			item := it.Item()
			if len(item.Key()) != 9 {
				continue
			}
			id := record.BeUint64(item.Key()[1:])
			var e *Entry
			if err := item.Value(func(v []byte) (err error) { e, err = decodeEntry(id, v); return err }); err != nil {
				continue
			}
			old := e.Accepted.Before(cutoff)
			stop := !old && freed >= over // ids follow acceptance: the rest are younger
			if stop || e.Outcome == "" {  // an entry still queued stays
				if oldest == 0 {
					oldest = record.UnixNano(e.Accepted)
				}
				if stop {
					break
				}
				continue
			}
			if !old {
				young++
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
			freed += j.attemptKeys(txn, id, &dels)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if err := j.deleteKept(dels); err != nil {
		return 0, err
	}
	j.bytes.Add(-freed)
	j.entries.Add(-entries)
	if oldest != 0 {
		j.oldest.Store(oldest)
	}
	j.warnCapBinds(young)
	return int(entries), nil
}

// warnCapBinds logs, once a spell, that the sweep removed young entries
// (younger than retain) for max_bytes: the journal keeps less than retain
// says.
func (j *Journal) warnCapBinds(young int64) {
	if young == 0 {
		j.capBinds.Store(false)
		return
	}
	if j.capBinds.Swap(true) {
		return
	}
	u := j.JournalUsage()
	j.log.Warn("spool: journal.max_bytes is removing entries younger than journal.retain; history is kept for less than retain",
		"removed_young", young, "max_bytes", u.MaxBytes, "retain", u.Retain, "rate_per_s", fmt.Sprintf("%.2f", u.Rate),
		"bytes_per_entry", u.BytesPerEntry, "kept_about", u.Holds.Round(time.Minute))
}

// attemptKeys appends the keys of id's attempts to dels and returns their
// bytes.
func (j *Journal) attemptKeys(txn *badger.Txn, id uint64, dels *[][]byte) int64 {
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
func (j *Journal) deleteKept(keys [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	wb := j.kept.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return err
		}
	}
	return wb.Flush()
}

// scanTrim keeps a read of the whole journal (Open's count, the index
// build) from leaving every page of the kept database it touched resident:
// Badger reads through memory maps, and the pages stay mapped until
// the spool trims them (Spool.Trim), which it does only every 250 ms and
// not before Open returns. Every trimEvery keys it trims at once, so the
// resident set such a read adds is bounded, not the journal's size.
type scanTrim struct {
	st store
	n  int
}

const trimEvery = 50_000

func (t *scanTrim) step() {
	if t.n++; t.n%trimEvery == 0 {
		t.st.Trim(false)
	}
}

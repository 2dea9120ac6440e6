package journal

// Building the indexes of index.go for a journal written before
// them, once, in the background: the spool opens at once, and List reads
// the older indexes (by id) until the build is done. New entries get their
// keys as they are written, the older indexes' too meanwhile; the build
// writes the keys of every entry already there, a chunk at a time, then
// switches List over, deletes the older indexes' keys and marks the
// journal indexed (keyIndexed). A build cut short by a stop starts again
// at the next Open.

import (
	"errors"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/internal/record"
	"github.com/hookpace/hookpace/spool"
)

var keyIndexed = []byte("jx")

var errStopped = errors.New("stopped")

// indexBuildChunk is the entries one transaction of the build reads.
const indexBuildChunk = 10_000

// indexBuild is the background build's: closed stop asks it to stop,
// done is closed when it has.
type indexBuild struct {
	needed     bool
	stop, done chan struct{}
}

// openIndex marks the journal indexed (at once for a journal without
// entries), or readies the build of its indexes (startIndexBuild).
func (j *Journal) openIndex() error {
	done, empty := false, true
	err := j.kept.View(func(txn *badger.Txn) error {
		if _, err := txn.Get(keyIndexed); err == nil {
			done = true
			return nil
		}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixJournal}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if len(it.Item().Key()) == 9 {
				empty = false
				break
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !done && empty {
		if err := j.kept.Update(func(txn *badger.Txn) error { return txn.Set(keyIndexed, nil) }); err != nil {
			return err
		}
		done = true
	}
	j.indexed.Store(done)
	j.build.needed = !done
	return nil
}

// startIndexBuild starts the build openIndex found needed, if any.
func (j *Journal) startIndexBuild() {
	if j.build.needed {
		j.build.stop, j.build.done = make(chan struct{}), make(chan struct{})
		go j.buildIndex()
	}
}

// stopIndexBuild stops the build, if one runs, and waits for it.
func (j *Journal) stopIndexBuild() {
	if j.build.stop == nil {
		return
	}
	close(j.build.stop)
	<-j.build.done
}

func (j *Journal) buildIndex() {
	defer close(j.build.done)
	began := time.Now()
	j.log.Info("spool: building the journal's indexes in the background; until done, listings by state, time or key read more of it",
		"entries", j.entries.Load())
	n, err := j.buildIndexKeys()
	if err == nil && n >= 0 {
		j.indexed.Store(true)
		if err = j.dropLegacyIndex(); errors.Is(err, errStopped) {
			return
		}
	}
	if err == nil && n >= 0 {
		err = j.kept.Update(func(txn *badger.Txn) error { return txn.Set(keyIndexed, nil) })
	}
	switch {
	case err != nil:
		j.log.Error("spool: building the journal's indexes failed; listings read it as before, and the next start tries again", "error", spool.ErrText(err))
	case n >= 0:
		j.log.Info("spool: the journal's indexes are built", "entries", n, "took", time.Since(began).Round(time.Millisecond))
	}
}

// buildIndexKeys writes the index keys of every entry; -1 when asked to
// stop first.
func (j *Journal) buildIndexKeys() (int, error) {
	var from uint64
	n := 0
	for {
		select {
		case <-j.build.stop:
			return -1, nil
		default:
		}
		var keys [][]byte
		read, last := 0, from
		err := j.kept.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixJournal}, PrefetchValues: true, PrefetchSize: 64})
			defer it.Close()
			for it.Seek(journalKey(from)); it.Valid() && read < indexBuildChunk; it.Next() {
				k := it.Item().Key()
				if len(k) != 9 {
					continue
				}
				id := record.BeUint64(k[1:])
				read, last = read+1, id
				var e *Entry
				if it.Item().Value(func(v []byte) (err error) { e, err = decodeEntryHead(id, v); return err }) != nil {
					continue
				}
				keys = append(keys, entryIndex(e)...)
			}
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("read entries from %s: %w", spool.IDString(from), err)
		}
		if err := j.setKept(keys); err != nil {
			return n, fmt.Errorf("write index keys: %w", err)
		}
		j.bytes.Add(keysLen(keys))
		j.st.Trim(false) // a chunk's pages: scanTrim
		n += read
		if read < indexBuildChunk {
			return n, nil
		}
		from = last + 1
	}
}

// dropLegacyIndex deletes the keys of the indexes by id (h and o).
func (j *Journal) dropLegacyIndex() error {
	for _, p := range []byte{prefixHostIndex, prefixOutcomeIndex} {
		for {
			var keys [][]byte
			err := j.kept.View(func(txn *badger.Txn) error {
				it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{p}})
				defer it.Close()
				for it.Rewind(); it.Valid() && len(keys) < indexBuildChunk; it.Next() {
					keys = append(keys, it.Item().KeyCopy(nil))
				}
				return nil
			})
			if err != nil {
				return err
			}
			if len(keys) == 0 {
				break
			}
			select {
			case <-j.build.stop:
				return errStopped
			default:
			}
			if err := j.deleteKept(keys); err != nil {
				return err
			}
			j.bytes.Add(-keysLen(keys))
		}
	}
	return nil
}

// setKept sets keys, without values, in the kept database.
func (j *Journal) setKept(keys [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	wb := j.kept.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Set(k, nil); err != nil {
			return err
		}
	}
	return wb.Flush()
}

package spool

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// Sizes hookpace opens Badger with (see BadgerOptions and Open).
const (
	queueMemTable    = 4 << 20
	keptMemTable     = 4 << 20
	valueLogFileSize = 32 << 20
)

// MaxRecordSize is the largest message record the spool stores (see
// Message.RecordSize): Badger refuses a value longer than its value-log
// file, and a message's record may grow by up to deadLetterRoom after it
// is admitted (its last error, and as a dead letter its host, reason and
// time; see maxReason). A larger message gets ErrTooLarge, before anything
// is written, so spool.max_body and the headers a message may carry must
// stay below it.
const MaxRecordSize = valueLogFileSize - deadLetterRoom

const deadLetterRoom = 64 << 10

// MinFreeFloor is the smallest spool.min_free that keeps a full disk from
// crashing hookpace. Badger writes its files through memory mappings of
// pre-sized, sparse files, so a page that the file system cannot allocate
// is a SIGBUS, not an error. The writer checks free space before every
// round and refuses the ops that would take it below min_free, counting
// each op's bytes (records, keys and Badger's per-entry overhead): what
// goes into the value log and the memtables' logs is accounted for. What
// Badger writes on its own, between two rounds, must fit in min_free:
//   - a memtable flushed to a table, written in one go: up to a
//     memtable's size, for each of the two databases;
//   - one batch more than the writer counted (txnBudget), for the
//     estimates.
//
// Value-log GC, which rewrites the live records of a value-log file, runs
// only with a value-log file's worth of space above min_free (see
// collectGarbage). check-config and start-up refuse a smaller min_free.
func MinFreeFloor() int64 { return queueMemTable + keptMemTable + txnBudget }

// emptySpool is more than a spool directory holds when the queue is
// empty and dropped: Badger's manifests, key registries and the first
// pages of its new files (about 60 KiB, measured on tmpfs).
const emptySpool = 1 << 20

// checkDisk refuses to open a spool on a file system too small to ever
// accept a webhook above MinFree, and warns when free space is already
// below it.
func checkDisk(opts Options) error {
	if opts.MinFree <= 0 {
		return nil
	}
	if opts.MinFree < MinFreeFloor() {
		return fmt.Errorf("spool.min_free (%d bytes) is below %d bytes, what Badger may write at once on its own", opts.MinFree, MinFreeFloor())
	}
	dir := opts.Dir
	for { // Badger creates the directory: look at what holds it
		if _, err := os.Stat(dir); err == nil || filepath.Dir(dir) == dir {
			break
		}
		dir = filepath.Dir(dir)
	}
	size, err := diskSize(dir)
	if err != nil {
		return nil // not knowable here: the writer's checks still apply
	}
	if size < opts.MinFree+emptySpool {
		return fmt.Errorf("the file system of spool.dir holds %d bytes, less than spool.min_free (%d) plus what an empty spool keeps (%d): no webhook could ever be accepted",
			size, opts.MinFree, int64(emptySpool))
	}
	if free, err := opts.DiskFree(dir); err == nil && free < opts.MinFree {
		opts.Logger.Warn("spool disk has less free space than spool.min_free: answering 503 to new webhooks until space returns",
			"free", free, "min_free", opts.MinFree)
	}
	return nil
}

// ValueThreshold is the size from which a message record goes to the
// value log; a smaller one is written inline, in the memtable's log (WAL)
// and then the LSM tree. Most webhooks' records (their body, headers and
// URL) are well under it, so that their commit writes and syncs one file,
// the WAL; a larger body costs a second sync, of the value log.
const ValueThreshold = 4 << 10

// BadgerOptions sizes Badger for a sidecar rather than a database server:
// small memtables, no block cache or compression, few goroutines. Records
// under ValueThreshold are inline; larger ones go to the value log, which
// is append-only like a WAL, so that compaction never rewrites a large
// body. An empty queue is dropped whole (see reclaim) and value-log GC
// handles a long-lived backlog.
//
// With records inline, every body passes through Badger's table builders
// (a memtable's flush, each compaction), and each builder holds its table
// in Go memory while it builds it, up to 8 of them kept pooled between
// compactions: the memtable's size and the tables' (1 MiB at every
// level) bound the heap a burst of webhooks costs.
//
// SyncWrites: every commit is fsync'd (the value log, then the memtable's
// WAL) before it returns. Both databases are opened without it where the
// spool syncs their commits itself (logSync, on Linux): one fdatasync a
// commit, of the WAL, and of the value log only when a value went there
// (applyQueue for the queue, syncKept for the kept database).
// DB.Sync after unsynced commits is not enough, and neither is syncing
// the newest WAL alone: the tail of a memtable retired in the middle of a
// round, or of a value-log file Badger has moved on from, is in the page
// cache alone until Badger has flushed it to a table; logSync syncs every
// log that was newest since its last sync. And value-log GC deletes a
// file as soon as it has rewritten its live records, unsynced:
// collectGarbage holds the file (an open iterator defers the deletion)
// until what GC wrote is synced. A power cut in any of these windows
// would lose messages already acknowledged.
//
// It is exported so that the benchmarks in bench/ measure Badger with
// exactly this tuning.
func BadgerOptions(dir string, log *slog.Logger) badger.Options {
	o := badger.DefaultOptions(dir).
		WithLogger(badgerLogger{log: log}).
		WithSyncWrites(true).
		WithDetectConflicts(false).
		WithMetricsEnabled(false).
		WithNumGoroutines(2).
		WithMemTableSize(queueMemTable).
		WithNumMemtables(2).
		WithNumLevelZeroTables(4).
		WithNumLevelZeroTablesStall(10).
		WithBaseTableSize(1 << 20).
		WithBaseLevelSize(8 << 20).
		WithNumCompactors(2).
		WithCompression(options.None).
		WithBlockCacheSize(0).
		WithIndexCacheSize(0).
		WithValueThreshold(ValueThreshold).
		WithValueLogFileSize(valueLogFileSize)
	o.TableSizeMultiplier = 1
	return o
}

// keptOptions are BadgerOptions for the kept database (dead letters and
// the journal), with tables of 2 MB below level 0. Every table starts its
// index with a 3 MB buffer whatever its size, so 1 MiB tables there (the
// journal's many small entries) held as much in index buffers as they
// saved in builders; at 2 MB each pooled allocator holds ~4 MB.
func keptOptions(o badger.Options) badger.Options {
	return o.WithBaseTableSize(2 << 20)
}

// badgerLogger sends Badger's own logging to slog. Badger is chatty at info
// level about routine compactions, so info and debug are logged at debug.
// Badger calls Debugf on every write, so a message is formatted only when
// its level is enabled. errors, if set, counts the errors Badger reports:
// some, such as a failed fsync of the value log, it only logs. A value it
// cannot read it logs and reads as empty, which the reader sees
// (errUnreadable): not counted, as it fails no write.
type badgerLogger struct {
	log    *slog.Logger
	errors *atomic.Uint64
}

func (l badgerLogger) Errorf(f string, a ...any) {
	if l.errors != nil && !badgerReadError(f) {
		l.errors.Add(1)
	}
	l.logf(slog.LevelError, f, a)
}

// badgerReadError reports whether f is one of the formats Badger logs a
// value it cannot read with (Item.Value): the error, then every version
// of the key.
func badgerReadError(f string) bool {
	return strings.HasPrefix(f, "Unable to read: ") || strings.HasPrefix(f, "Key: %v, Version : %v") || strings.HasPrefix(f, "Invalid read: ")
}

func (l badgerLogger) Warningf(f string, a ...any) { l.logf(slog.LevelWarn, f, a) }
func (l badgerLogger) Infof(f string, a ...any)    { l.logf(slog.LevelDebug, f, a) }
func (l badgerLogger) Debugf(f string, a ...any)   { l.logf(slog.LevelDebug, f, a) }

func (l badgerLogger) logf(level slog.Level, f string, a []any) {
	ctx := context.Background()
	if !l.log.Enabled(ctx, level) {
		return
	}
	l.log.Log(ctx, level, "badger: "+strings.TrimSpace(fmt.Sprintf(f, a...)))
}

// gcLoop reclaims value-log space held by delivered messages, and keeps
// the spool's mapped files from inflating the resident set.
func (s *Spool) gcLoop() {
	defer close(s.gcDone)
	trim := time.NewTicker(residentTrimEvery)
	defer trim.Stop()
	gc := time.NewTicker(30 * time.Second)
	defer gc.Stop()
	for {
		select {
		case <-s.gcStop:
			return
		case <-trim.C:
			trimResident(s.opts.Dir, s.opts.trimLimit)
		case <-gc.C:
			for n, err := s.sweepOnce(); err == nil && n == sweepMax; n, err = s.sweepOnce() {
			}
			s.collectGarbage()
		}
	}
}

// residentFileLimit is how much of the spool's mapped files may stay
// resident before they are trimmed.
const residentFileLimit = 16 << 20

// residentTrimEvery is how often the resident set is checked against
// residentFileLimit. With records inline, a compaction reads and writes
// a backlog's tables through their mappings at tens of MiB in a quarter
// of a second; a check reads /proc/self/status (microseconds) and a trim
// only happens above the limit.
const residentTrimEvery = 50 * time.Millisecond

// collectGarbage rewrites or drops value-log files whose messages have
// mostly been delivered, until none is worth it.
func (s *Spool) collectGarbage() {
	for s.roomForGC() && s.collectGarbageOf(s.queue, s.qlog, &s.queueMu) {
	}
	for s.roomForGC() && s.collectGarbageOf(s.kept, s.klog, &s.keptMu) {
	}
}

// collectGarbageOf runs one value-log GC on db, whose commits l syncs
// under mu, and reports whether it moved a file. Where the spool syncs
// db's commits itself, what GC rewrote is synced before the file it moved
// from is deleted: an iterator open across the two keeps Badger from
// deleting it sooner.
func (s *Spool) collectGarbageOf(db *badger.DB, l *logSync, mu *sync.Mutex) bool {
	mu.Lock()
	defer mu.Unlock()
	if l == nil {
		return db.RunValueLogGC(0.5) == nil
	}
	txn := s.readTxn(db)
	it := txn.NewIterator(badger.IteratorOptions{})
	moved := db.RunValueLogGC(0.5) == nil
	if err := l.sync(true); err != nil {
		// Deleting the file now could lose what GC moved: keep it (and
		// every file GC moves later) until the next start.
		s.log.Error("spool: syncing after value-log GC failed; keeping the value-log files GC moved from", "error", err)
		return false
	}
	it.Close()
	txn.Discard()
	return moved
}

// readTxn starts a read-only transaction on db that sees every commit.
func (s *Spool) readTxn(db *badger.DB) *badger.Txn {
	if db == s.queue {
		return db.NewTransactionAt(math.MaxUint64, false)
	}
	return db.NewTransaction(false)
}

// syncKept makes every commit to the kept database that has returned
// durable: each of its writers that needs durability calls it after its
// commit. vlog says whether that commit may have put a value in the value
// log (one of ValueThreshold bytes or more). Writers that need no
// durability of their own (index builds, sweeps) do not call it: their
// small writes are in the logs that the next sync covers, since it syncs
// every log that was newest since the one before. Without klog, Badger
// has synced each commit itself.
func (s *Spool) syncKept(vlog bool) error {
	if s.klog == nil {
		return nil
	}
	s.keptMu.Lock()
	defer s.keptMu.Unlock()
	return s.klog.sync(vlog)
}

// openDBLog creates a database's directory, removes the empty logs a
// power cut may have left in it (removeEmptyLogs), and watches it for the
// logs Badger writes (logSync); nil where that cannot be done, and Badger
// syncs every commit itself.
func openDBLog(dir string, log *slog.Logger) *logSync {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil // badger.Open says why
	}
	if err := removeEmptyLogs(dir); err != nil {
		log.Warn("spool: removing the empty logs a power cut leaves failed", "dir", dir, "error", err)
	}
	l, err := openLogSync(dir)
	if err != nil {
		log.Debug("spool: Badger syncs the commits itself (two syncs a commit)", "dir", dir, "error", err)
		return nil
	}
	return l
}

// roomForGC reports whether value-log GC may run: it rewrites the live
// records of a value-log file before it deletes the file, which must not
// eat into min_free (see MinFreeFloor).
func (s *Spool) roomForGC() bool {
	room, limited := s.headroomNow()
	return !limited || room >= valueLogFileSize
}

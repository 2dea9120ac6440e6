package spool

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// valueThreshold sends every message record to the value log: see
// BadgerOptions.
const valueThreshold = 64

// BadgerOptions sizes Badger for a sidecar rather than a database server:
// small memtables, no block cache or compression, few goroutines. Message
// records go to the value log, which is append-only like a WAL, so the LSM
// tree holds only keys and pointers and compaction stays cheap in CPU and
// memory however large the backlog; an empty queue is dropped whole (see
// reclaim) and value-log GC handles a long-lived backlog.
//
// SyncWrites: every commit is fsync'd (the value log, then the memtable's
// WAL) before it returns. DB.Sync after unsynced commits is not enough:
// it syncs only the newest WAL, so the tail of a memtable that has just
// been retired is in the page cache alone until Badger has flushed it to
// a table, and value-log GC deletes a file as soon as it has rewritten its
// live records, unsynced. A power cut in either window loses messages
// already acknowledged.
//
// It is exported so that the benchmarks in bench/ measure Badger with
// exactly this tuning.
func BadgerOptions(dir string, log *slog.Logger) badger.Options {
	return badger.DefaultOptions(dir).
		WithLogger(badgerLogger{log: log}).
		WithSyncWrites(true).
		WithDetectConflicts(false).
		WithMetricsEnabled(false).
		WithNumGoroutines(2).
		WithMemTableSize(8 << 20).
		WithNumMemtables(2).
		WithNumLevelZeroTables(4).
		WithNumLevelZeroTablesStall(10).
		WithBaseTableSize(2 << 20).
		WithBaseLevelSize(8 << 20).
		WithNumCompactors(2).
		WithCompression(options.None).
		WithBlockCacheSize(0).
		WithIndexCacheSize(0).
		WithValueThreshold(valueThreshold).
		WithValueLogFileSize(32 << 20)
}

// badgerLogger sends Badger's own logging to slog. Badger is chatty at info
// level about routine compactions, so info and debug are logged at debug.
// Badger calls Debugf on every write, so a message is formatted only when
// its level is enabled. errors, if set, counts the errors Badger reports:
// some, such as a failed fsync of the value log, it only logs.
type badgerLogger struct {
	log    *slog.Logger
	errors *atomic.Uint64
}

func (l badgerLogger) Errorf(f string, a ...any) {
	if l.errors != nil {
		l.errors.Add(1)
	}
	l.logf(slog.LevelError, f, a)
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
	trim := time.NewTicker(250 * time.Millisecond)
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
			s.collectGarbage()
		}
	}
}

// residentFileLimit is how much of the spool's mapped files may stay
// resident before they are trimmed.
const residentFileLimit = 32 << 20

// collectGarbage rewrites or drops value-log files whose messages have
// mostly been delivered, until none is worth it.
func (s *Spool) collectGarbage() {
	for _, db := range []*badger.DB{s.queue, s.kept} {
		for db.RunValueLogGC(0.5) == nil {
		}
	}
}

package main

// Badger group-commit cost in isolation: one writer committing batches of
// 64 x 1 KiB entries with the spool's Badger options (spool.BadgerOptions),
// made durable the way spool/writer.go does it (SyncWrites(true): Badger
// syncs inside Commit) or the way it did until that was found to leave
// retired WALs unsynced (Commit, then DB.Sync(), which msyncs the current
// memtable WAL and value-log file). "VlogRecords" is the spool's current layout
// (value threshold 64 B: records in the value log); "Inline" keeps 1 KiB
// values in the LSM tree (threshold 64 KiB, the layout before 6891bb5).
//
//	go test ./bench -run '^$' -bench Badger -benchtime 3s

import (
	"encoding/binary"
	"log/slog"
	"os"
	"syscall"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/spool"
)

// spoolBadgerOptions is the spool's own tuning, with the value threshold
// under test and no logger.
func spoolBadgerOptions(dir string, valueThreshold int64) badger.Options {
	return spool.BadgerOptions(dir, slog.New(slog.DiscardHandler)).WithValueThreshold(valueThreshold)
}

func benchBadgerBatches(b *testing.B, valueThreshold int64, syncWrites bool) {
	dir, err := os.MkdirTemp(flags.workdir, "hookpace-badger-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := badger.Open(spoolBadgerOptions(dir, valueThreshold).WithSyncWrites(syncWrites))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	const batch = 64
	val := make([]byte, 1100)
	var seq uint64
	b.ResetTimer()
	start, cpu0 := time.Now(), processCPU()
	for i := 0; i < b.N; i++ {
		txn := db.NewTransaction(true)
		for j := 0; j < batch; j++ {
			seq++
			key := binary.BigEndian.AppendUint64([]byte("q127.0.0.1:9\x00"), seq)
			if err := txn.Set(key, val); err != nil {
				b.Fatal(err)
			}
		}
		if err := txn.Commit(); err != nil {
			b.Fatal(err)
		}
		if !syncWrites {
			if err := db.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	}
	el, cpu := time.Since(start), processCPU()-cpu0
	b.ReportMetric(float64(b.N*batch)/el.Seconds(), "msgs/s")
	b.ReportMetric(float64(el.Microseconds())/float64(b.N), "µs/batch")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/batch")
}

// processCPU is this process's user+system CPU time (all its threads,
// Badger's goroutines included).
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkBadgerVlogRecordsDBSync(b *testing.B)     { benchBadgerBatches(b, 64, false) }
func BenchmarkBadgerVlogRecordsSyncWrites(b *testing.B) { benchBadgerBatches(b, 64, true) }
func BenchmarkBadgerInlineDBSync(b *testing.B)          { benchBadgerBatches(b, 64<<10, false) }
func BenchmarkBadgerInlineSyncWrites(b *testing.B)      { benchBadgerBatches(b, 64<<10, true) }

// Package spool is hookpace's durable queue: webhooks accepted by the proxy
// are written to an embedded Badger database, fsync'd in groups, and kept
// until a delivery succeeds or they are moved to the dead letters.
//
// The spool directory holds two Badger databases. queue/ holds every queued
// message, keyed so that one prefix scan returns a host's queue in FIFO
// order; it churns, and is dropped whole whenever it is empty. dead/, the
// kept database, holds what must outlive the queue: the dead letters, the id
// sequence and the hosts an operator paused.
//
//	queue/  q <host> 0x00 <id:8 bytes big-endian>   queued message without a lane (Lane{})
//	queue/  l <host> 0x00 <key> 0x00 <rank> <id>    queued message in a lane (lanekey.go)
//	dead/   d <id:8 bytes big-endian>              dead letter
//	dead/   mseq                                    id ceiling: no id above it handed out
//	dead/   p <host>                                host paused by an operator
//	queue/  k <host> 0x00 <key>                     idempotency key (dedupe.go)
//	dead/   k <host> 0x00 <key>                     the same, kept when queue/ is dropped
//
// Every write to the queue, and every dead-letter write, goes through one
// writer goroutine (writer.go), which commits ops in groups (ops.go). The
// ledger (ledger.go) keeps the accounting and decides admission.
package spool

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/internal/record"
)

// Options configures a spool. Zero values take the defaults noted.
type Options struct {
	Dir         string
	MaxMessages int64   // default 1,000,000
	MaxBytes    int64   // default 1 GiB
	HighWater   float64 // default 0.8: stop accepting at this fraction of either limit
	LowWater    float64 // default 0.5: accept again at or below this fraction
	// MinFree is the free space on the spool's file system that the spool
	// never writes into: an append whose write would take free space below
	// it fails with a *WriteError (ErrDiskFull). Badger writes through
	// memory-mapped files, where a full disk would be a crash, not an error:
	// Open refuses less than MinFreeFloor(). 0: no check, for tests and
	// benchmarks only (config refuses it).
	MinFree int64
	Logger  *slog.Logger
	// DedupeMaxKeys and DedupeMaxBytes bound the idempotency keys
	// remembered (default 1,000,000 and 256 MiB): beyond them new keys
	// are not remembered until old ones expire.
	DedupeMaxKeys  int64
	DedupeMaxBytes int64
	// Now is the clock idempotency keys expire by, and the journal's
	// retention (default time.Now).
	Now func() time.Time
	// History, when set, is called by Open once the queue is read and
	// before the spool takes a write, with the spool, its kept database
	// (where dead letters are, and the history may write its own keys)
	// and the spool's mutex, which the writer holds when it calls
	// Settled: what it returns is told of every round (History) and
	// closed by Close. nil: no history.
	History func(s *Spool, kept *badger.DB, mu *sync.Mutex) (History, error)
	// Replica keeps a copy of the queue off this node (nil: none); see
	// Replica. ReplicaName is the replica the spool belongs to: a spool
	// records it, and refuses to open under another name.
	Replica     Replica
	ReplicaName string

	// For tests: adjust the queue and the kept databases' Badger options
	// (smaller files, to make them rotate), and the resident size above
	// which the spool's mappings are trimmed (0: residentFileLimit).
	tuneQueue func(badger.Options) badger.Options
	tuneKept  func(badger.Options) badger.Options
	trimLimit int64
	// For tests: called by the writer while a commit is staged.
	whileCommitting func(*badger.DB)
	// DiskFree is the free space on dir's file system (default: the
	// file system's own word), for tests of a nearly full disk.
	DiskFree func(dir string) (int64, error)
}

// limits are the ledger's bounds from o.
func (o *Options) limits() limits {
	return limits{MaxMessages: o.MaxMessages, MaxBytes: o.MaxBytes, HighWater: o.HighWater, LowWater: o.LowWater}
}

func (o *Options) setDefaults() {
	if o.MaxMessages <= 0 {
		o.MaxMessages = 1_000_000
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 1 << 30
	}
	if o.HighWater <= 0 || o.HighWater > 1 {
		o.HighWater = 0.8
	}
	if o.LowWater < 0 || o.LowWater >= o.HighWater {
		o.LowWater = min(0.5, o.HighWater/2)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.DedupeMaxKeys <= 0 {
		o.DedupeMaxKeys = defaultDedupeMaxKeys
	}
	if o.DedupeMaxBytes <= 0 {
		o.DedupeMaxBytes = defaultDedupeMaxBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.tuneQueue == nil {
		o.tuneQueue = func(b badger.Options) badger.Options { return b }
	}
	if o.tuneKept == nil {
		o.tuneKept = func(b badger.Options) badger.Options { return b }
	}
	if o.trimLimit <= 0 {
		o.trimLimit = residentFileLimit
	}
	if o.DiskFree == nil {
		o.DiskFree = diskFree
	}
}

// Errors that callers map to HTTP answers. Their texts are fixed: no error
// that the spool returns holds stored bytes.
var (
	ErrClosed   = errors.New("spool is closed")
	ErrDiskFull = errors.New("spool disk is nearly full (spool.min_free)")
	ErrDirGone  = errors.New("spool directory was removed or replaced while hookpace ran; restart hookpace")
	// ErrTooLarge: the message's record is larger than the spool can store
	// (MaxRecordSize). Retrying cannot help.
	ErrTooLarge = errors.New("message too large for the spool")
	// ErrStorage: the store failed the write; the log says why.
	ErrStorage = errors.New("storage error (see hookpace's log)")
)

// WriteError wraps a failure to make a write durable: the caller must not
// acknowledge the message. Err is one of the errors above, or
// errBadgerReported.
type WriteError struct{ Err error }

func (e *WriteError) Error() string { return "spool write failed: " + e.Err.Error() }
func (e *WriteError) Unwrap() error { return e.Err }

// Spool is the Badger-backed queue. All writes go through one writer
// goroutine that commits whatever has accumulated in one transaction,
// fsync'd once (group commit), so many concurrent ingests share the cost
// of one sync.
type Spool struct {
	queue *badger.DB // every queued message; dropped whole when empty
	// kept holds what outlives the queue: dead letters (written by the
	// writer goroutine), the id ceiling (raiseCeiling, saveSeq) and paused
	// hosts (SetPaused). See the package comment for its keys.
	kept *badger.DB
	// instance is the spool's identity, drawn when it was created: the
	// spool part of its webhooks' ids (see Ref).
	instance uint64
	opts     Options
	log      *slog.Logger
	// unreadable: the ids of the queued records being removed because
	// their values cannot be read (dropUnreadable), each removed once.
	unreadable sync.Map

	badgerErrors *atomic.Uint64 // errors Badger has logged (see apply)

	// qlog syncs the queue database's commits (logsync_linux.go); nil:
	// Badger syncs them itself (SyncWrites). queueMu is held across a
	// commit to the queue and its sync, and across a value-log GC and its
	// sync, so that no write falls between a sync's reading of which files
	// are newest and the sync itself.
	qlog    *logSync
	queueMu sync.Mutex

	// klog syncs the kept database's commits the same way; nil: Badger
	// syncs them itself. Its writers commit from several goroutines, each
	// syncing after its commit (syncKept); keptMu serialises the syncs,
	// and is held across a value-log GC and its sync.
	klog   *logSync
	keptMu sync.Mutex

	free freeSpace // the cached free-space reading (refuse.go)

	notify atomic.Pointer[func([]*Message)] // see Notify; nil: nobody listens

	// mu guards everything below: the pending write batch, the ledger and
	// the disk-health refusals.
	mu        sync.Mutex
	cond      *sync.Cond // writer waits here for pending ops
	pending   []op
	held      []op // ops that only remove, waiting for free space (hold.go)
	waiting   int  // ops in pending that someone waits for
	lingering bool // the writer's linger timer is running
	lingerUp  bool // it has fired: commit what is pending
	closed    bool
	seq       uint64 // the last id handed out
	ledger    *ledger
	diskFull  bool
	diskNeed  int64 // while diskFull: the fewest bytes refused for space
	dirGone   bool
	queueDir  os.FileInfo // the queue directory as opened, to notice it vanish

	writerDone chan struct{}
	gcDone     chan struct{}
	gcStop     chan struct{}

	// The queue database runs in Badger's managed mode: the writer
	// goroutine, its only writer, numbers its transactions itself (ts, the
	// last commit timestamp used) instead of going through Badger's
	// oracle, which makes every new transaction wait until Badger's
	// watermark goroutine has caught up with the previous commit: under
	// load that wait was half of a commit round. Readers read the newest
	// version of every key (see Read).
	ts uint64 // owned by the writer goroutine

	// ceil is the durable id ceiling (keySeq): no id above it has been
	// handed out, by this run or an earlier one, so that after a kill -9
	// the sequence resumes above it. The writer raises it, durably, before
	// a round may hand out an id above it (raiseCeiling). Owned by the
	// writer goroutine (and Open, Close).
	ceil uint64

	coal coalState // coalescing (coalesce.go), guarded by mu

	hist History // told of each round (Options.History), or noHistory

	replicaEpoch uint64 // see ReplicaEpoch; guarded by mu

	// shown is the highest id that readers of the queue may see: an id
	// above it is of a round not yet settled, whose replica may still
	// refuse it (applyQueue). A reader loads it before it reads, so that
	// every id it covers is settled: stored in the replica, or undone.
	// It never covers an id not yet handed out (from Open on). With no
	// replica, every id.
	shown atomic.Uint64
}

// Open opens (or creates) the spool in opts.Dir and counts what is queued.
// It reads keys only, never whole messages, so a large backlog opens fast.
func Open(opts Options) (*Spool, error) {
	opts.setDefaults()
	if err := checkDisk(opts); err != nil {
		return nil, fmt.Errorf("open spool %q: %w", opts.Dir, err)
	}
	// Until gcLoop trims, from the end of Open on.
	defer trimWhileOpening(opts.Dir, opts.trimLimit)()
	errs := new(atomic.Uint64)
	logger := badgerLogger{opts.Logger, errs}
	qlog := openDBLog(filepath.Join(opts.Dir, "queue"), opts.Logger)
	queue, err := badger.OpenManaged(opts.tuneQueue(BadgerOptions(filepath.Join(opts.Dir, "queue"), opts.Logger)).WithSyncWrites(qlog == nil).WithLogger(logger))
	if err == nil && qlog != nil {
		err = qlog.scan(false)
		if err != nil {
			queue.Close()
		}
	}
	if err != nil {
		qlog.close()
		return nil, fmt.Errorf("open spool %q: %w", opts.Dir, err)
	}
	settleOpen(opts.Dir)
	klog := openDBLog(filepath.Join(opts.Dir, "dead"), opts.Logger)
	kept, err := badger.Open(opts.tuneKept(keptOptions(BadgerOptions(filepath.Join(opts.Dir, "dead"), opts.Logger)).WithMemTableSize(keptMemTable)).WithSyncWrites(klog == nil).WithLogger(logger))
	if err == nil && klog != nil {
		err = klog.scan(false)
		if err != nil {
			kept.Close()
		}
	}
	if err != nil {
		queue.Close()
		qlog.close()
		klog.close()
		return nil, fmt.Errorf("open spool %q: %w", opts.Dir, err)
	}
	settleOpen(opts.Dir)
	queueDir, err := os.Stat(filepath.Join(opts.Dir, "queue"))
	if err != nil {
		queue.Close()
		kept.Close()
		qlog.close()
		klog.close()
		return nil, fmt.Errorf("open spool %q: %w", opts.Dir, err)
	}
	s := &Spool{
		queueDir:     queueDir,
		queue:        queue,
		qlog:         qlog,
		kept:         kept,
		klog:         klog,
		badgerErrors: errs,
		opts:         opts,
		log:          opts.Logger,
		ledger:       newLedger(opts.limits(), opts.Logger),
		writerDone:   make(chan struct{}),
		gcDone:       make(chan struct{}),
		gcStop:       make(chan struct{}),
	}
	s.cond = sync.NewCond(&s.mu)
	s.hist = noHistory{}
	s.coal.init()
	// Versions written by an earlier run, managed or not, are all at or
	// below MaxVersion.
	s.ts = queue.MaxVersion()
	queue.SetDiscardTs(s.ts)
	err = s.load()
	if err == nil {
		err = s.loadInstance()
	}
	// Every id on disk is at or below seq; with a replica, the writer's
	// rounds raise shown above the ids they hand out once settled.
	if opts.Replica != nil {
		s.shown.Store(s.seq)
	} else {
		s.shown.Store(math.MaxUint64)
	}
	if err == nil {
		err = s.loadReplica()
	}
	if err == nil {
		err = s.openHistory()
	}
	if err != nil {
		queue.Close()
		kept.Close()
		qlog.close()
		klog.close()
		return nil, fmt.Errorf("open spool %q: %w", opts.Dir, err)
	}
	s.ledger.accepting = s.ledger.fraction(0) < opts.HighWater
	lsm, vlog := queue.Size()
	s.ledger.written = lsm + vlog
	if s.ledger.messages == 0 && s.ledger.written >= reclaimAfter {
		s.reclaim() // an empty queue left by the last run
	}
	go s.writeLoop()
	go s.gcLoop()
	return s, nil
}

// settleOpen gives back what opening a Badger database left behind:
// opening reads its newest value-log file and replays its memtables'
// logs, allocating a copy of every record (several times the file's size
// in garbage) and leaving the files' pages resident. Done after each of
// the two databases, the start-up peak is the larger of their opens
// rather than their sum.
func settleOpen(dir string) {
	debug.FreeOSMemory()
	trimResident(dir, 0)
}

// load counts what the spool holds and finds the highest id in use: the
// id ceiling, or an id in the queue, the dead letters or the remembered
// idempotency keys above it (written by a version without the ceiling).
func (s *Spool) load() error {
	err := s.kept.View(func(txn *badger.Txn) error {
		if item, err := txn.Get(keySeq); err == nil {
			if err := item.Value(func(v []byte) error {
				if len(v) == 8 {
					s.seq = record.BeUint64(v)
					s.ceil = s.seq
				}
				return nil
			}); err != nil {
				return err
			}
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		// Dead letters are counted per host, which takes reading the head
		// of each (their keys are ids only).
		return eachID(txn, prefixDead, true, func(id uint64, item *badger.Item) (bool, error) {
			s.seq = max(s.seq, id)
			// One that cannot be read still counts, under no host: listing
			// it will say what is wrong with it.
			var host string
			item.Value(func(v []byte) (err error) {
				host, err = deadHost(v)
				return err
			})
			s.ledger.buried(host, 1)
			return true, nil
		})
	})
	if err != nil {
		return err
	}
	if err := s.loadOnce(); err != nil {
		return err
	}
	return s.queue.View(func(txn *badger.Txn) error {
		// The queue keys (lane Lane{}), then the other lanes' keys.
		for _, p := range []byte{prefixQueue, prefixLane} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{p}})
			for it.Rewind(); it.Valid(); it.Next() {
				item := it.Item()
				host, lane, id, ok := parseAnyKey(item.Key())
				if !ok {
					continue
				}
				// Badger's estimate of storedSize: the value and the key.
				size := int64(item.ValueSize()) + int64(len(item.Key()))
				s.ledger.add(host, 1, size)
				s.ledger.laned(host, lane, 1)
				s.seq = max(s.seq, id)
			}
			it.Close()
		}
		return nil
	})
}

// Close stops the writer after it has committed everything pending, syncs
// and closes Badger. On a disk that another process has filled below what
// closing writes (Badger flushes its memtables to tables through memory
// mappings: a crash, not an error, without the space), it leaves Badger
// open and returns an error wrapping ErrDiskFull: every committed write is
// fsync'd, and the next start recovers it as after a crash.
func (s *Spool) Close() error {
	// What the history holds is made durable there while the writer still
	// runs, so that the records it kept ahead in the queue are dropped
	// before it stops.
	s.hist.Sync()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
	<-s.writerDone
	s.hist.Close()
	s.failHeld()
	close(s.gcStop)
	<-s.gcDone
	if room, limited := s.headroomNow(); limited && room+s.opts.MinFree < MinFreeFloor() {
		free := room + s.opts.MinFree
		s.log.Error("spool not closed: the disk is too full for Badger to flush its memtables; the next start recovers what was committed",
			"free", free, "needs", MinFreeFloor())
		return fmt.Errorf("%w: %d bytes free, closing writes up to %d", ErrDiskFull, free, MinFreeFloor())
	}
	s.saveSeq()
	err := s.queue.Close()
	s.qlog.close()
	if kerr := s.kept.Close(); err == nil {
		err = kerr
	}
	s.klog.close()
	return err
}

// reclaimAfter is how many bytes the queue database may accumulate before
// it is dropped, the next time the spool is empty.
const reclaimAfter = 16 << 20

// queueIsEmpty reports whether the queue database holds no live message,
// and enough dead space to be worth dropping: every message counted is an
// append still waiting to be written.
func (s *Spool) queueIsEmpty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A nearly full disk has the queue dropped as soon as it is empty.
	worth := s.ledger.written >= reclaimAfter || s.diskFull && s.ledger.written > 0
	if !worth || s.ledger.messages > int64(len(s.pending)) {
		return false
	}
	reserved := int64(0)
	for _, o := range s.pending {
		if _, ok := o.(*appendOp); ok {
			reserved++
		}
	}
	return s.ledger.messages == reserved
}

// reclaim gives the queue database's disk space back once every message
// has left it: Badger's own compaction and value-log GC only catch up with
// deletes slowly, and an empty queue can be dropped whole. It runs when
// the spool opens and on the writer goroutine, so no write can race it.
// Ids never go backwards: the durable id ceiling is at or above every id
// handed out, or is first raised there.
func (s *Spool) reclaim() {
	if s.seqSnapshot() > s.ceil { // at Open: ids in the queue above the ceiling
		if err := s.raiseCeiling(0); err != nil {
			return
		}
	}
	if err := s.moveOnce(); err != nil {
		s.log.Warn("spool: could not keep the idempotency keys of the empty queue; not dropping it", "error", err)
		return
	}
	s.hist.Sync() // the outcomes ahead in the queue go with it
	start := time.Now()
	s.queueMu.Lock()
	err := s.queue.DropAll()
	if s.qlog != nil && err == nil {
		// Let go of the dropped logs, so that their space is given back
		// now, and take up the new ones.
		if serr := s.qlog.sync(true); serr != nil {
			s.log.Error("spool: syncing the emptied queue failed", "error", serr)
		}
	}
	s.queueMu.Unlock()
	if err != nil {
		s.log.Warn("spool: could not drop the empty queue", "error", err)
		return
	}
	s.mu.Lock()
	s.ledger.written = 0
	s.mu.Unlock()
	s.log.Debug("spool: queue empty, disk space reclaimed", "took", time.Since(start).String())
}

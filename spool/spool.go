package spool

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// Options configures a spool. Zero values take the defaults noted.
type Options struct {
	Dir         string
	MaxMessages int64   // default 1,000,000
	MaxBytes    int64   // default 1 GiB
	HighWater   float64 // default 0.8: stop accepting at this fraction of either limit
	LowWater    float64 // default 0.5: accept again at or below this fraction
	// MinFree is the free space on the spool's file system below which
	// appends fail with a *WriteError (ErrDiskFull). Badger writes through
	// memory-mapped files, where a full disk would be a crash, not an error,
	// so the spool stops writing well before. 0: no check.
	MinFree int64
	Logger  *slog.Logger

	// For tests: adjust the queue database's Badger options (smaller files,
	// to make them rotate), and the resident size above which the spool's
	// mappings are trimmed (0: residentFileLimit).
	tuneQueue func(badger.Options) badger.Options
	trimLimit int64
	// For tests: called by the writer while a commit is staged.
	whileCommitting func(*badger.DB)
	// For tests: the free space on dir's file system (default diskFree).
	diskFree func(dir string) (int64, error)
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
	if o.tuneQueue == nil {
		o.tuneQueue = func(b badger.Options) badger.Options { return b }
	}
	if o.trimLimit <= 0 {
		o.trimLimit = residentFileLimit
	}
	if o.diskFree == nil {
		o.diskFree = diskFree
	}
}

// Errors that callers map to HTTP answers.
var (
	ErrClosed   = errors.New("spool is closed")
	ErrDiskFull = errors.New("spool disk is nearly full (spool.min_free)")
	ErrDirGone  = errors.New("spool directory was removed or replaced while hookpace ran; restart hookpace")
)

// FullError reports that the spool (or one host's share of it) is past its
// high-water mark. RetryAfter estimates when it will accept again.
type FullError struct {
	Host string // set when only this host's max_queued was reached
	// Over is, for a host's max_queued, how many of its queued messages
	// must leave before one more fits. How soon that is depends on the
	// host's pacing, which the spool does not know: RetryAfter is then
	// zero, for the caller to estimate.
	Over       int64
	RetryAfter time.Duration
}

func (e *FullError) Error() string {
	if e.Host != "" {
		return fmt.Sprintf("queue for %s is full (max_queued)", e.Host)
	}
	return "spool is past its high-water mark"
}

// WriteError wraps a failure to make a write durable: the caller must not
// acknowledge the message.
type WriteError struct{ Err error }

func (e *WriteError) Error() string { return "spool write failed: " + e.Err.Error() }
func (e *WriteError) Unwrap() error { return e.Err }

// Spool is the Badger-backed queue. All writes go through one writer
// goroutine that commits whatever has accumulated in one transaction,
// fsync'd once (group commit), so many concurrent ingests share the cost
// of one sync.
type Spool struct {
	db   *badger.DB // queue: every queued message; dropped whole when empty
	dead *badger.DB // dead letters and the id sequence
	opts Options
	log  *slog.Logger

	badgerErrors *atomic.Uint64 // errors Badger has logged (see apply)

	notify atomic.Pointer[func([]*Message)] // see Notify; nil: nobody listens

	// mu guards everything below: the pending write batch, usage
	// accounting and the admission gate.
	mu        sync.Mutex
	cond      *sync.Cond // writer waits here for pending ops
	pending   []*op
	waiting   int  // ops in pending that someone waits for
	lingering bool // the writer's linger timer is running
	lingerUp  bool // it has fired: commit what is pending
	closed    bool
	seq       uint64
	messages  int64
	bytes     int64
	hosts     map[string]*HostUsage
	nDead     int64
	accepting bool
	dirty     int64 // bytes written to the queue since it was last dropped
	diskFull  bool
	dirGone   bool
	drain     drainMeter
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
}

// HostUsage is what one host holds in the spool.
type HostUsage struct {
	Messages int64
	Bytes    int64
}

// Usage is a point-in-time view of the spool's size and admission state.
type Usage struct {
	Messages    int64   `json:"messages"`
	Bytes       int64   `json:"bytes"`
	MaxMessages int64   `json:"max_messages"`
	MaxBytes    int64   `json:"max_bytes"`
	Fraction    float64 `json:"usage"` // the larger of the two fractions
	HighWater   float64 `json:"high_water"`
	LowWater    float64 `json:"low_water"`
	Accepting   bool    `json:"accepting"`
	Dead        int64   `json:"dead_letters"`
	DrainRate   float64 `json:"drain_per_second"`
	Hosts       int     `json:"hosts"`
	// Refusing says why appends fail whatever the watermarks say: the disk
	// is nearly full, or the spool directory is gone. Empty otherwise.
	Refusing string `json:"refusing,omitempty"`
}

// Open opens (or creates) the spool in opts.Dir and counts what is queued.
// It reads keys only, never whole messages, so a large backlog opens fast.
func Open(opts Options) (*Spool, error) {
	opts.setDefaults()
	errs := new(atomic.Uint64)
	logger := badgerLogger{opts.Logger, errs}
	db, err := badger.OpenManaged(opts.tuneQueue(BadgerOptions(filepath.Join(opts.Dir, "queue"), opts.Logger)).WithLogger(logger))
	if err != nil {
		return nil, fmt.Errorf("open spool %q: %w", opts.Dir, err)
	}
	dead, err := badger.Open(BadgerOptions(filepath.Join(opts.Dir, "dead"), opts.Logger).WithMemTableSize(4 << 20).WithLogger(logger))
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open spool %q: %w", opts.Dir, err)
	}
	queueDir, err := os.Stat(filepath.Join(opts.Dir, "queue"))
	if err != nil {
		db.Close()
		dead.Close()
		return nil, fmt.Errorf("open spool %q: %w", opts.Dir, err)
	}
	s := &Spool{
		queueDir:     queueDir,
		db:           db,
		dead:         dead,
		badgerErrors: errs,
		opts:         opts,
		log:          opts.Logger,
		hosts:        make(map[string]*HostUsage),
		accepting:    true,
		writerDone:   make(chan struct{}),
		gcDone:       make(chan struct{}),
		gcStop:       make(chan struct{}),
	}
	s.cond = sync.NewCond(&s.mu)
	// Versions written by an earlier run, managed or not, are all at or
	// below MaxVersion.
	s.ts = db.MaxVersion()
	db.SetDiscardTs(s.ts)
	if err := s.load(); err != nil {
		db.Close()
		dead.Close()
		return nil, fmt.Errorf("open spool %q: %w", opts.Dir, err)
	}
	s.accepting = s.fractionLocked(0) < opts.HighWater
	lsm, vlog := db.Size()
	s.dirty = lsm + vlog
	if s.messages == 0 && s.dirty >= reclaimAfter {
		s.reclaim() // an empty queue left by the last run
	}
	go s.writeLoop()
	go s.gcLoop()
	return s, nil
}

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

// load counts what the spool holds and finds the highest id in use.
func (s *Spool) load() error {
	err := s.dead.View(func(txn *badger.Txn) error {
		if item, err := txn.Get(keySeq); err == nil {
			if err := item.Value(func(v []byte) error {
				if len(v) == 8 {
					s.seq = beUint64(v)
				}
				return nil
			}); err != nil {
				return err
			}
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixDead}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if k := it.Item().Key(); len(k) == 9 {
				s.nDead++
				s.seq = max(s.seq, beUint64(k[1:]))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixQueue}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			host, id, ok := parseQueueKey(item.Key())
			if !ok {
				continue
			}
			size := int64(item.ValueSize()) + int64(len(item.Key()))
			s.account(host, 1, size)
			s.seq = max(s.seq, id)
		}
		return nil
	})
}

// Close stops the writer after it has committed everything pending, syncs
// and closes Badger.
func (s *Spool) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
	<-s.writerDone
	close(s.gcStop)
	<-s.gcDone
	s.saveSeq()
	err := s.db.Close()
	if derr := s.dead.Close(); err == nil {
		err = derr
	}
	return err
}

// Usage reports the spool's size and admission state.
func (s *Spool) Usage() Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Usage{
		Messages:    s.messages,
		Bytes:       s.bytes,
		MaxMessages: s.opts.MaxMessages,
		MaxBytes:    s.opts.MaxBytes,
		Fraction:    s.fractionLocked(0),
		HighWater:   s.opts.HighWater,
		LowWater:    s.opts.LowWater,
		Accepting:   s.accepting,
		Dead:        s.nDead,
		DrainRate:   s.drain.rate(time.Now()),
		Hosts:       len(s.hosts),
		Refusing:    s.refusingLocked(),
	}
}

// refusingLocked is Usage.Refusing.
func (s *Spool) refusingLocked() string {
	switch {
	case s.dirGone:
		return ErrDirGone.Error()
	case s.diskFull:
		return ErrDiskFull.Error()
	}
	return ""
}

// Accepting reports whether new webhooks are being admitted.
func (s *Spool) Accepting() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepting && !s.closed
}

// Full returns the backpressure answer new webhooks get now, with its
// Retry-After estimate, or nil while the spool accepts them (or is closed:
// Append says so). It lets the proxy refuse before reading a body; Append
// still decides for each message, with its size.
func (s *Spool) Full() *FullError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.accepting || s.closed {
		return nil
	}
	return &FullError{RetryAfter: s.retryAfterLocked()}
}

// HostUsage returns what host holds in the spool.
func (s *Spool) HostUsage(host string) HostUsage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.hosts[host]; u != nil {
		return *u
	}
	return HostUsage{}
}

// Hosts returns every host with queued messages and what each holds.
func (s *Spool) Hosts() map[string]HostUsage {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]HostUsage, len(s.hosts))
	for h, u := range s.hosts {
		out[h] = *u
	}
	return out
}

// SetLimits applies new bounds (from a config reload).
func (s *Spool) SetLimits(maxMessages, maxBytes int64, high, low float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.opts
	o.MaxMessages, o.MaxBytes, o.HighWater, o.LowWater = maxMessages, maxBytes, high, low
	o.setDefaults()
	s.opts.MaxMessages, s.opts.MaxBytes, s.opts.HighWater, s.opts.LowWater = o.MaxMessages, o.MaxBytes, o.HighWater, o.LowWater
	s.updateGateLocked()
}

// account adds n messages of size bytes to host's usage (n may be negative).
// Sizes read back at start-up are Badger's estimates for value-log entries
// (a byte or so off), so bytes are reset whenever the count reaches zero:
// the error can never accumulate.
func (s *Spool) account(host string, n, size int64) {
	s.messages += n
	s.bytes += size
	if s.messages <= 0 {
		s.bytes = 0
	}
	u := s.hosts[host]
	if u == nil {
		u = &HostUsage{}
		s.hosts[host] = u
	}
	u.Messages += n
	u.Bytes += size
	if u.Messages <= 0 || u.Bytes < 0 {
		delete(s.hosts, host)
	}
}

// fractionLocked is the larger of the message and byte fractions in use,
// counting extra bytes about to be added.
func (s *Spool) fractionLocked(extra int64) float64 {
	fm := float64(s.messages) / float64(s.opts.MaxMessages)
	fb := float64(s.bytes+extra) / float64(s.opts.MaxBytes)
	return math.Max(fm, fb)
}

// admit applies backpressure and reserves room for a message: it is the
// only place that decides whether a new webhook may be written.
func (s *Spool) admit(host string, size, hostLimit int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.updateGateLocked()
	if s.accepting && s.fractionLocked(size) > s.opts.HighWater {
		// The message would take the spool past its high-water mark.
		s.setAcceptingLocked(false)
	}
	if !s.accepting {
		return &FullError{RetryAfter: s.retryAfterLocked()}
	}
	if hostLimit > 0 {
		if u := s.hosts[host]; u != nil && u.Messages >= hostLimit {
			return &FullError{Host: host, Over: u.Messages - hostLimit + 1}
		}
	}
	s.account(host, 1, size)
	return nil
}

// updateGateLocked applies the hysteresis: stop at the high-water mark,
// start again only at or below the low-water mark.
func (s *Spool) updateGateLocked() {
	f := s.fractionLocked(0)
	switch {
	case s.accepting && f >= s.opts.HighWater:
		s.setAcceptingLocked(false)
	case !s.accepting && f <= s.opts.LowWater:
		s.setAcceptingLocked(true)
	}
}

func (s *Spool) setAcceptingLocked(on bool) {
	if s.accepting == on {
		return
	}
	s.accepting = on
	msg := "spool past high-water mark: answering 429 to new webhooks"
	if on {
		msg = "spool at or below low-water mark: accepting webhooks again"
	}
	s.log.Warn(msg, "messages", s.messages, "bytes", s.bytes, "usage", fmt.Sprintf("%.3f", s.fractionLocked(0)),
		"high_water", s.opts.HighWater, "low_water", s.opts.LowWater)
}

// retryAfterLocked estimates how long until the spool drains to its
// low-water mark at the current drain rate, between 1 s and 5 min.
func (s *Spool) retryAfterLocked() time.Duration {
	excess := s.fractionLocked(0) - s.opts.LowWater
	if excess <= 0 {
		return time.Second
	}
	msgs := excess * float64(s.opts.MaxMessages)
	if fb := float64(s.bytes) / float64(s.opts.MaxBytes); fb > float64(s.messages)/float64(s.opts.MaxMessages) && s.messages > 0 {
		// Bytes are the binding limit: convert to messages at the average size.
		msgs = (fb - s.opts.LowWater) * float64(s.opts.MaxBytes) / (float64(s.bytes) / float64(s.messages))
	}
	return retryAfter(msgs, s.drain.rate(time.Now()))
}

// Bounds of the Retry-After estimates given with backpressure.
const (
	MinRetryAfter     = time.Second
	MaxRetryAfter     = 5 * time.Minute
	UnknownRetryAfter = 30 * time.Second // when nothing says how soon
)

// retryAfter is how long msgs take to leave at rate (per second), between
// MinRetryAfter and MaxRetryAfter; UnknownRetryAfter when nothing has left
// lately.
func retryAfter(msgs, rate float64) time.Duration {
	if rate <= 0 {
		return UnknownRetryAfter
	}
	d := time.Duration(msgs / rate * float64(time.Second))
	return min(max(d, MinRetryAfter), MaxRetryAfter)
}

func beUint64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}

// drainMeter estimates how many messages per second leave the spool, over
// the last few seconds, without a ticker. Its window starts no earlier than
// the current spell of draining, so the first estimates after a quiet spell
// (a burst arriving at an idle spool, a host resuming) are not diluted by
// the quiet seconds before them.
type drainMeter struct {
	buckets [8]struct {
		sec int64
		n   int64
	}
	since time.Time // when the current spell of draining started
	last  time.Time // the latest add
}

const (
	drainWindow  = 7 * time.Second        // a spell of draining ends after this long without one
	drainMinSpan = 250 * time.Millisecond // the shortest span a rate is taken over
)

func (d *drainMeter) add(now time.Time, n int64) {
	if d.last.IsZero() || now.Sub(d.last) > drainWindow {
		d.since = now
	}
	d.last = now
	sec := now.Unix()
	b := &d.buckets[sec%int64(len(d.buckets))]
	if b.sec != sec {
		b.sec, b.n = sec, 0
	}
	b.n += n
}

// rate averages over the current second and the six before it, or over
// the time since the spell of draining started if that is shorter (but at
// least drainMinSpan).
func (d *drainMeter) rate(now time.Time) float64 {
	if d.last.IsZero() || now.Sub(d.last) > drainWindow {
		return 0
	}
	sec := now.Unix()
	oldest := sec - int64(len(d.buckets)) + 2 // the 8th bucket may be reused: left out
	var total int64
	for _, b := range d.buckets {
		if b.sec >= oldest && b.sec <= sec {
			total += b.n
		}
	}
	start := time.Unix(oldest, 0)
	if d.since.After(start) {
		start = d.since
	}
	return float64(total) / max(now.Sub(start), drainMinSpan).Seconds()
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
	for _, db := range []*badger.DB{s.db, s.dead} {
		for db.RunValueLogGC(0.5) == nil {
		}
	}
}

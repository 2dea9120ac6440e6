package spool

import (
	"os"
	"path/filepath"
	"sync"
	"time"
)

// refuseUnsafe fails, before anything of a round is written, the ops that
// the spool cannot keep, and logs when refusals start and end:
//   - ops that would take free space below MinFree: the round's writes are
//     counted in submission order against the headroom above MinFree, and
//     an op that does not fit is refused (a smaller one after it may
//     still fit). Badger writes through memory-mapped files, where a full
//     disk is a crash, not an error; see MinFreeFloor for what the
//     headroom leaves to Badger's own writes.
//   - new messages while the queue directory is no longer the one opened
//     (removed or replaced underneath): Badger would go on writing into
//     unlinked files, which vanish when the process exits, so a 202 would
//     be a lie.
//
// Deletes are never refused: they are what frees space. When something
// else has filled the disk, they wait for space (hold.go).
func (s *Spool) refuseUnsafe(batch []op) []op {
	// One reading of free space serves both checks (see headroom).
	room, limited := s.headroom()
	if s.tooFullToRemoveIn(room, limited, batch) {
		batch = s.holdShrinking(batch)
	}
	adds, grows := false, false
	for _, o := range batch {
		adds = adds || o.adds()
		grows = grows || !o.shrinks()
	}
	if !grows {
		return batch
	}
	var gone error
	if adds && s.queueMayHaveMoved() {
		gone = s.checkQueueDir()
	}
	room0 := room
	need := int64(0) // the least new message that was refused for space
	kept := batch[:0:0]
	var refused []op
	for _, o := range batch {
		w := int64(o.weight())
		switch {
		case o.shrinks():
		case gone != nil && o.adds():
			o.base().err = &WriteError{Err: gone}
		case limited && w > room:
			o.base().err = &WriteError{Err: ErrDiskFull}
			if o.adds() && (need == 0 || w < need) {
				need = w // what new webhooks are refused for: see Usage
			}
		}
		if o.base().err != nil {
			refused = append(refused, o)
			continue
		}
		room -= w
		kept = append(kept, o)
	}
	if limited {
		s.free.spend(room0 - room)
		s.setDiskFull(need, room)
	}
	if len(refused) == 0 {
		return batch
	}
	// Give the reservations back before answering, so that a refused
	// caller never sees its own message still counted.
	s.mu.Lock()
	for _, o := range refused {
		o.release(s.ledger)
	}
	s.ledger.gate()
	s.mu.Unlock()
	for _, o := range refused {
		if !o.adds() {
			s.log.Warn("spool disk nearly full: a write was dropped", "host", o.base().hostName(), "op", o.kind())
		}
		o.base().reply()
	}
	return kept
}

// headroom is how many bytes may be written before free space falls below
// MinFree; false when there is no limit (MinFree 0, or free space unknown).
// It reads a cached reading of free space less what the writer has
// counted since (see freeSpace); headroomNow reads the disk.
func (s *Spool) headroom() (int64, bool) {
	if s.opts.MinFree <= 0 {
		return 0, false
	}
	if free, ok := s.free.cached(s.opts.Now(), s.opts.MinFree); ok {
		return free - s.opts.MinFree, true
	}
	return s.headroomNow()
}

// headroomNow is headroom from a new reading of free space, which the
// cache keeps.
func (s *Spool) headroomNow() (int64, bool) {
	if s.opts.MinFree <= 0 {
		return 0, false
	}
	free, err := s.opts.DiskFree(s.opts.Dir)
	if err != nil {
		s.free.forget()
		return 0, false
	}
	s.free.read(free, s.opts.Now())
	return free - s.opts.MinFree, true
}

// Refreshing the free-space reading: a reading serves until it is
// freeEvery old, or until the writer has counted freeSpendMax bytes
// against it; not at all when it showed less than freeNear above
// min_free, nor while the writer refuses for space. What the writer
// counts is taken off the reading; what Badger writes on its own
// (memtable flushes, compaction) shows at the next reading, and min_free
// holds room for it (see MinFreeFloor). Another process that fills the
// disk shows at the next reading too: only one that writes more than
// freeNear within freeEvery outruns it, and then the writer may write
// into a full disk, which Badger's mapped files make a crash.
const (
	freeEvery    = time.Second
	freeSpendMax = 4 << 20
	freeNear     = 64 << 20
)

// freeSpace is the spool's cached reading of free disk space.
type freeSpace struct {
	mu    sync.Mutex
	ok    bool
	free  int64     // bytes free at the reading
	at    time.Time // when it was read
	spent int64     // bytes the writer counted since
	short bool      // the writer is refusing for space: read every time
}

// cached returns the free space the reading leaves, or false when a new
// reading is due.
func (f *freeSpace) cached(now time.Time, minFree int64) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ok || f.short || now.Sub(f.at) >= freeEvery || now.Before(f.at) ||
		f.free-minFree < freeNear || f.spent >= freeSpendMax {
		return 0, false
	}
	return f.free - f.spent, true
}

func (f *freeSpace) read(free int64, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ok, f.free, f.at, f.spent = true, free, now, 0
}

func (f *freeSpace) forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ok = false
}

// refusing records whether the writer refuses writes for space.
func (f *freeSpace) refusing(short bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.short = short
}

// spend counts n bytes written against the reading.
func (f *freeSpace) spend(n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.spent += max(n, 0)
}

// recheckDisk ends a refusal for space once there is room above MinFree
// for what was refused, so that the spool says it accepts again even before a new
// webhook tries (a load balancer that reads /readyz sends none meanwhile).
func (s *Spool) recheckDisk() {
	s.mu.Lock()
	full := s.diskFull
	s.mu.Unlock()
	if !full {
		return
	}
	s.mu.Lock()
	need := s.diskNeed
	s.mu.Unlock()
	if room, ok := s.headroomNow(); !ok || room >= need {
		s.setDiskFull(0, room)
	}
}

// setDiskFull records whether the last round that writes had to refuse an
// op for space (need: the fewest bytes refused; 0: none), and logs when
// that changes. room is what was left.
func (s *Spool) setDiskFull(need, room int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.diskNeed = need
	full := need > 0
	s.free.refusing(full)
	if full == s.diskFull {
		return
	}
	s.diskFull = full
	if full {
		s.log.Error("spool disk nearly full: answering 503 to new webhooks until space returns", "headroom", max(room, 0), "min_free", s.opts.MinFree)
	} else {
		s.log.Warn("spool disk has space again: accepting webhooks", "headroom", room, "min_free", s.opts.MinFree)
	}
}

// queueMayHaveMoved reports whether the queue directory may no longer be
// the one opened: it was gone when last looked at, or the watch on it
// (logSync) saw it moved or removed, or something in the directory
// holding it. Without the watch, always.
func (s *Spool) queueMayHaveMoved() bool {
	if s.qlog == nil {
		return true
	}
	s.mu.Lock()
	gone := s.dirGone
	s.mu.Unlock()
	s.queueMu.Lock()
	moved := s.qlog.movedSince()
	s.queueMu.Unlock()
	return gone || moved
}

// checkQueueDir returns ErrDirGone while the queue directory is not the
// one opened.
func (s *Spool) checkQueueDir() error {
	fi, err := os.Stat(filepath.Join(s.opts.Dir, "queue"))
	gone := err != nil || !os.SameFile(fi, s.queueDir)
	s.mu.Lock()
	changed := gone != s.dirGone
	s.dirGone = gone
	s.mu.Unlock()
	if changed {
		if gone {
			s.log.Error("spool directory removed or replaced underneath: answering 503 to new webhooks", "dir", s.opts.Dir, "error", err)
		} else {
			s.log.Warn("spool directory is back: accepting webhooks", "dir", s.opts.Dir)
		}
	}
	if gone {
		return ErrDirGone
	}
	return nil
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

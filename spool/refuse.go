package spool

import (
	"os"
	"path/filepath"
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
	// One statfs a round: the free space it reads serves both checks.
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
	if adds {
		gone = s.checkQueueDir()
	}
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
func (s *Spool) headroom() (int64, bool) {
	if s.opts.MinFree <= 0 {
		return 0, false
	}
	free, err := s.opts.diskFree(s.opts.Dir)
	if err != nil {
		return 0, false
	}
	return free - s.opts.MinFree, true
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
	if room, ok := s.headroom(); !ok || room >= need {
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

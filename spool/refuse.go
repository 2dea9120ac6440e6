package spool

import (
	"os"
	"path/filepath"
)

// refuseUnsafeAppends fails the ops of a round that add messages while the
// spool cannot keep them, and logs when that starts and ends:
//   - free space is below MinFree;
//   - the queue directory is no longer the one opened (removed or replaced
//     underneath): Badger would go on writing into unlinked files, which
//     vanish when the process exits, so a 202 would be a lie.
//
// Deletes still go through: they are what frees space.
func (s *Spool) refuseUnsafeAppends(batch []op) []op {
	grows := false
	for _, o := range batch {
		grows = grows || o.adds()
	}
	if !grows {
		return batch
	}
	why := s.checkDiskFree()
	if err := s.checkQueueDir(); err != nil {
		why = err
	}
	if why == nil {
		return batch
	}
	kept := batch[:0:0]
	var refused []op
	for _, o := range batch {
		if o.adds() {
			o.base().err = &WriteError{Err: why}
			refused = append(refused, o)
			continue
		}
		kept = append(kept, o)
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
		o.base().reply()
	}
	return kept
}

// checkDiskFree returns ErrDiskFull while free space is below MinFree.
func (s *Spool) checkDiskFree() error {
	if s.opts.MinFree <= 0 {
		return nil
	}
	free, err := s.opts.diskFree(s.opts.Dir)
	full := err == nil && free < s.opts.MinFree
	s.mu.Lock()
	if full != s.diskFull {
		s.diskFull = full
		if full {
			s.log.Error("spool disk nearly full: answering 503 to new webhooks until space returns", "free", free, "min_free", s.opts.MinFree)
		} else {
			s.log.Warn("spool disk has space again: accepting webhooks", "free", free)
		}
	}
	s.mu.Unlock()
	if full {
		return ErrDiskFull
	}
	return nil
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

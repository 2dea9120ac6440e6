package spool

// Deletes while another process fills the disk. A delete
// writes a tombstone into Badger's memtable, a memory-mapped file that
// Badger sizes up front as a sparse file: a page of it that the file
// system can no longer allocate is a SIGBUS, not an error. MinFree keeps
// room for Badger's own writes (see MinFreeFloor): the spool's writes
// alone never leave less than txnBudget free. When something else takes
// free space below holdBelow plus what a round's removals write, the
// writer holds back the ops that only remove (deletes after delivery,
// purges, sweeps) until there is room again, instead of writing them.
// Deletes are otherwise never held back: they are what frees space. Whoever waits for
// a delete waits on: the dispatcher keeps that delivery's slot, so
// deliveries pause by themselves. Nothing is lost: a webhook whose delete
// is held is still queued on disk, and is delivered again only if
// hookpace stops before space returns.

import (
	"time"
)

// holdRecheck is how often held ops look for space again.
const holdRecheck = 250 * time.Millisecond

// holdBelow is the free space below which removals wait (with what they
// write): less than the spool's own writes ever leave (txnBudget), more
// than a round of removals writes into the memtable (maxBatch small
// tombstones).
const holdBelow = txnBudget / 2

// tooFullToRemove reports whether free space is too short for the
// removals among ops to be written safely: free is below holdBelow plus
// their weight.
func (s *Spool) tooFullToRemove(ops []op) bool {
	room, limited := s.headroomNow()
	return s.tooFullToRemoveIn(room, limited, ops)
}

// tooFullToRemoveIn is tooFullToRemove given the headroom (see headroom).
func (s *Spool) tooFullToRemoveIn(room int64, limited bool, ops []op) bool {
	if !limited {
		return false
	}
	need := int64(holdBelow)
	for _, o := range ops {
		if o.shrinks() {
			need += int64(o.weight())
		}
	}
	return room+s.opts.MinFree < need
}

// holdShrinking takes the ops of batch that only remove out of it, into
// s.held (tooFullToRemove said so), and returns the others.
func (s *Spool) holdShrinking(batch []op) []op {
	kept := batch[:0:0]
	var held []op
	for _, o := range batch {
		if o.shrinks() {
			held = append(held, o)
		} else {
			kept = append(kept, o)
		}
	}
	if len(held) == 0 {
		return batch
	}
	s.mu.Lock()
	first := len(s.held) == 0
	s.held = append(s.held, held...)
	s.mu.Unlock()
	if first {
		s.log.Error("spool disk filled by something else: deletes wait for space, and deliveries pause until it returns",
			"min_free", s.opts.MinFree)
		time.AfterFunc(holdRecheck, s.releaseHeld)
	}
	return kept
}

// releaseHeld gives the held ops back to the writer, first in line, once
// there is room for them again; until then it looks every holdRecheck.
// Once the spool is closing, Close fails them instead.
func (s *Spool) releaseHeld() {
	s.mu.Lock()
	held := s.held
	s.mu.Unlock()
	full := s.tooFullToRemove(held)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || len(s.held) == 0 {
		return
	}
	if full {
		time.AfterFunc(holdRecheck, s.releaseHeld)
		return
	}
	for _, o := range s.held {
		if o.base().done != nil {
			s.waiting++
		}
	}
	n := len(s.held)
	s.pending = append(s.held, s.pending...)
	s.held = nil
	s.cond.Signal()
	s.log.Warn("spool disk has space again: held deletes go ahead", "ops", n)
}

// failHeld answers the ops still held when the spool closes: their
// webhooks stay queued on disk, for the next start.
func (s *Spool) failHeld() {
	s.mu.Lock()
	held := s.held
	s.held = nil
	s.mu.Unlock()
	for _, o := range held {
		o.base().err = &WriteError{Err: ErrDiskFull}
		o.base().reply()
	}
	if len(held) > 0 {
		s.log.Warn("spool closed with deletes still held for space: their webhooks stay queued and are delivered again after the next start", "ops", len(held))
	}
}

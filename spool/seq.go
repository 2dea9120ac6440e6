package spool

import badger "github.com/dgraph-io/badger/v4"

// Ids are unique and only grow: receivers de-duplicate on them
// (X-Hookpace-Id, webhook-id), so an id handed out before a crash must
// never be handed out again. The kept database holds the id ceiling
// (keySeq), which no id handed out exceeds; the writer raises it, durably,
// ahead of use, and a clean close lowers it to the last id. After a crash
// the ids go on above the ceiling, leaving a gap.

// saveSeq lowers the durable id ceiling to the last id handed out, once
// the writer has stopped (Close), so that a clean restart goes on without
// a gap.
func (s *Spool) saveSeq() error {
	seq := s.seqSnapshot()
	err := s.kept.Update(func(txn *badger.Txn) error { return txn.Set(keySeq, be64(seq)) })
	if err == nil {
		err = s.syncKept(false)
	}
	if err != nil {
		s.log.Warn("spool: saving the id sequence failed", "error", err)
		return err
	}
	s.ceil = seq
	return nil
}

// ceilingStep is how far ahead of the ids in use the id ceiling is raised:
// one write to the kept database, fsync'd, per ceilingStep ids.
const ceilingStep = 1 << 16

// raiseCeiling makes the id ceiling durable at least ceilingStep above
// max(need, the last id handed out), before a round hands out ids up to
// need. A crash then costs a gap in the ids, never a reused one: receivers
// de-duplicate on them (X-Hookpace-Id, webhook-id).
func (s *Spool) raiseCeiling(need uint64) error {
	ceil := max(need, s.seqSnapshot()) + ceilingStep
	err := s.kept.Update(func(txn *badger.Txn) error { return txn.Set(keySeq, be64(ceil)) })
	if err == nil {
		err = s.syncKept(false)
	}
	if err != nil {
		s.log.Error("spool: raising the id ceiling failed", "error", errText(err))
		return err
	}
	s.ceil = ceil
	return nil
}

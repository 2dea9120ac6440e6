package spool

import (
	"errors"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// journalState is the journal's share of the spool: records waiting for
// the next round, and what the journal holds.
type journalState struct {
	pending []journalRec // guarded by Spool.mu
	bytes   atomic.Int64 // keys and values kept, about
	entries atomic.Int64
	failed  atomic.Bool // a journal commit failed: logged once
}

// journalRec is one journal write: a Set of key to val. grow is what it
// adds to the journal's bytes; entry says it is a new entry. An entry's
// record is made from e by encode, off the writer's path: e is a copy of
// what the message said when the record was taken (the dispatcher may
// change the message since).
type journalRec struct {
	key, val []byte
	grow     int64
	entry    bool
	e        *Entry // to encode
}

func acceptedRec(m *Message) journalRec {
	return journalRec{e: entryOf(m), entry: true}
}

// outcomeRec rewrites m's entry with its outcome.
func outcomeRec(m *Message, outcome, reason string, at time.Time) journalRec {
	e := entryOf(m)
	e.Outcome, e.OutcomeAt, e.Reason = outcome, at, clip(reason)
	return journalRec{e: e}
}

// encode makes the record of an entry: its URL redacted, and what it adds
// to the journal (an outcome replaces the accepted record).
func (r *journalRec) encode() {
	if r.e == nil {
		return
	}
	r.e.URL = redactURL(r.e.URL)
	r.key, r.val = journalKey(r.e.ID), r.e.encode()
	if r.entry {
		r.grow = int64(len(r.key) + len(r.val))
	} else {
		out := *r.e
		out.Outcome, out.OutcomeAt, out.Reason = "", time.Time{}, ""
		r.grow = int64(len(r.val) - len(out.encode()))
	}
	r.e = nil
}

// RecordAttempt adds an attempt of m to the journal, with the next round.
// The answer's secret headers are redacted and its body cut to
// JournalOptions.ResponseBody.
func (s *Spool) RecordAttempt(m *Message, a Attempt) {
	if s.opts.Journal.Off {
		return
	}
	a.Header = redactHeader(a.Header)
	if len(a.Body) > s.opts.Journal.ResponseBody {
		a.Body = a.Body[:s.opts.Journal.ResponseBody]
	}
	a.Error = clip(a.Error)
	k, v := attemptKey(m.ID, a.At), a.encode()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.jr.pending = append(s.jr.pending, journalRec{key: k, val: v, grow: int64(len(k) + len(v))})
	if len(s.pending) == 0 && len(s.jr.pending) == 1 {
		s.cond.Signal() // the writer starts its linger
	}
}

// JournalResponseBody is how many bytes of a partner's answer an attempt
// keeps (0: the journal is off).
func (s *Spool) JournalResponseBody() int {
	if s.opts.Journal.Off {
		return 0
	}
	return s.opts.Journal.ResponseBody
}

// journalAcceptedLocked queues the accepted records of a round's new
// messages for the next round, before they are announced.
func (s *Spool) journalAcceptedLocked(batch []op) {
	if s.opts.Journal.Off {
		return
	}
	for _, o := range batch {
		if o.adds() && o.base().err == nil {
			s.jr.pending = append(s.jr.pending, acceptedRec(o.base().msg))
		}
	}
}

// outcomes are the journal's records of the messages a round removes
// from the queue.
func (s *Spool) outcomes(batch []op) []journalRec {
	var out []journalRec
	now := s.opts.Now()
	for _, o := range batch {
		if o.base().err != nil {
			continue
		}
		switch o := o.(type) {
		case *deleteOp:
			if o.to != "" {
				out = append(out, outcomeRec(o.msg, OutcomeHandedOff, o.to, now))
			} else {
				out = append(out, outcomeRec(o.msg, OutcomeDelivered, "", now))
			}
		case *buryOp:
			out = append(out, outcomeRec(o.msg, OutcomeDead, o.reason, now))
		case *dropOp:
			out = append(out, outcomeRec(o.msg, OutcomePurged, o.by, now))
		}
	}
	return out
}

// journalCommit starts writing the journal's records for a round: those
// pending from earlier, then the round's outcomes, in one kept
// transaction committed alongside the queue's. The channel is closed once
// they are durable (or have failed, which is logged).
func (s *Spool) journalCommit(batch []op) <-chan struct{} {
	if s.opts.Journal.Off {
		return nil
	}
	s.mu.Lock()
	recs := s.jr.pending
	s.jr.pending = nil
	full := s.diskFull
	s.mu.Unlock()
	recs = append(recs, s.outcomes(batch)...)
	if len(recs) == 0 || full {
		return nil // a nearly full disk keeps no history: space is for webhooks
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.writeJournal(recs); err != nil {
			if !s.jr.failed.Swap(true) {
				s.log.Error("spool: journal write failed; history is missing for some webhooks (logged once)", "error", errText(err))
			}
		}
	}()
	return done
}

// writeJournal commits recs to the kept database, in as few transactions
// as Badger allows.
func (s *Spool) writeJournal(recs []journalRec) error {
	txn := s.kept.NewTransaction(true)
	defer func() { txn.Discard() }()
	var grow, entries int64
	flush := func() error {
		if err := txn.Commit(); err != nil {
			return err
		}
		s.jr.bytes.Add(grow)
		s.jr.entries.Add(entries)
		grow, entries = 0, 0
		txn = s.kept.NewTransaction(true)
		return nil
	}
	for _, r := range recs {
		r.encode()
		err := txn.Set(r.key, r.val)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err = flush(); err == nil {
				err = txn.Set(r.key, r.val)
			}
		}
		if err != nil {
			return err
		}
		grow += r.grow
		if r.entry {
			entries++
		}
	}
	return flush()
}

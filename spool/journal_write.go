package spool

import (
	"cmp"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// Journal is the history of every webhook, kept in the spool's kept
// database: records waiting for the next round, and what the journal
// holds. s is the spool it keeps the history of. Spool.Journal hands it
// out.
type Journal struct {
	s *Spool

	// Guarded by Spool.mu: records for the journal's writer (journalLoop),
	// numbered in order; seq is the last handed over, durable the last
	// committed.
	pending          []journalRec
	seq, durable     uint64
	cond             *sync.Cond // on Spool.mu: the writer waits for records, waiters for commits
	waiting          int        // goroutines waiting for a commit: it goes at once
	soon             uint64     // the last record an attempt in flight will wait for (hurry): it goes at once
	lingerUp         bool       // the writer's linger is over
	closing, stopped bool
	done             chan struct{}

	bytes   atomic.Int64 // keys and values kept, about
	entries atomic.Int64
	failed  atomic.Bool // a journal commit failed: logged once
	// indexed: the indexes of journal_index.go are complete, and List
	// reads them.
	indexed atomic.Bool
	// from: ids at or below it were queued before the journal was kept
	// (keyJournalFrom); their outcomes write their index keys too.
	from  uint64
	build indexBuild // journal_index_build.go
	// oldest: the Accepted of the oldest entry, Unix nanoseconds, as the
	// last sweep (or Open) saw it: the span the journal's rate is
	// measured over.
	oldest   atomic.Int64
	capBinds atomic.Bool // the sweep removes entries younger than retain: logged once a spell
	short    atomic.Bool // too little room above min_free: records dropped (logged once a spell)

	// Guarded by Spool.mu: the coalesce keys of the queued webhooks this
	// run accepted with one (journal_coalesce.go), complete for ids above
	// coalFrom once coalSet.
	coal     map[uint64]*coalInfo
	coalFrom uint64
	coalSet  bool
}

// Journal is the spool's journal; it lives and closes with the spool.
func (s *Spool) Journal() *Journal { return &s.jr }

// Instance is the spool part of the ids of the webhooks the journal
// keeps (see Ref).
func (j *Journal) Instance() uint64 { return j.s.instance }

// journalRec is one journal write: a Set of key to val. grow is what it
// adds to the journal's bytes; entry says it is a new entry. An entry's
// record is made from e by encode, off the writer's path: e is a copy of
// what the message said when the record was taken (the dispatcher may
// change the message since).
type journalRec struct {
	key, val []byte
	index    [][]byte // index keys to set (journal_index.go; encode)
	unindex  [][]byte // and to delete
	grow     int64
	entry    bool
	// whole: an outcome that writes the entry's index keys too, as an
	// accepted record does (one of a webhook the journal may not have
	// an accepted record of).
	whole bool
	e     *Entry // to encode
	// merge: what only the entry's record says (its coalesce key and
	// replacements; with replaced, its arrival) is read from it
	// (mergeEntry), the run not knowing it.
	merge, replaced bool
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

// encode makes the record of an entry: its URL redacted, its index keys,
// and what it adds to the journal (an outcome replaces the accepted
// record). legacy: the keys of the indexes before journal_index.go too,
// while those are still read (journal_index_build.go).
func (r *journalRec) encode(legacy bool) {
	if r.e == nil {
		return
	}
	r.e.URL = RedactURL(r.e.URL)
	r.key, r.val = journalKey(r.e.ID), r.e.encode()
	if r.entry || r.whole {
		r.index = entryIndex(r.e)
		if legacy {
			r.index = append(r.index, hostIndexKey(r.e.Host, r.e.ID))
		}
	}
	if r.e.Outcome != "" {
		if !r.entry && !r.whole {
			r.index = append(r.index, indexKey(indexPrefix(ixState, r.e.Outcome), pos{atOf(r.e.Accepted), r.e.ID}))
		}
		if !r.entry {
			r.unindex = append(r.unindex, queuedIndexKey(r.e))
		}
		if legacy {
			r.index = append(r.index, outcomeIndexKey(r.e.Outcome, r.e.ID))
		}
	}
	if r.entry {
		// An accepted record is durable before its webhook leaves the
		// queue, or written again at Open.
		r.grow = int64(len(r.key)+len(r.val)) + keysLen(r.index)
	} else { // it replaces the accepted record: what the outcome added
		r.grow = int64(strLen(r.e.Outcome)+varintLen(unixNano(r.e.OutcomeAt))+strLen(r.e.Reason)-3) + keysLen(r.index)
		if !r.whole {
			r.grow -= keysLen(r.unindex) // its queued key, which its accepted record counted
		}
		if r.e.Final != nil {
			r.grow += int64(len(r.val)) // about: the attempt is most of it
		}
	}
	r.e = nil
}

// RecordAttempt adds an attempt of m to the journal. The answer's secret
// headers are redacted and its body cut to JournalOptions.ResponseBody.
func (j *Journal) RecordAttempt(m *Message, a Attempt) {
	if j.s.opts.Journal.Off {
		return
	}
	a.Header = RedactHeader(a.Header)
	if len(a.Body) > j.s.opts.Journal.ResponseBody {
		a.Body = a.Body[:j.s.opts.Journal.ResponseBody]
	}
	a.Error = clip(a.Error)
	if a.Error == "" && a.Status >= 200 && a.Status < 300 {
		// It delivered m: it goes with the outcome, in m's entry (the
		// delete follows, and reads it after the delete's submit).
		m.final = &a
		return
	}
	k, v := attemptKey(m.ID, a.At), a.encode()
	j.s.mu.Lock()
	defer j.s.mu.Unlock()
	j.journalLocked(journalRec{key: k, val: v, grow: int64(len(k) + len(v))})
}

// JournalResponseBody is how many bytes of a partner's answer an attempt
// keeps (0: the journal is off).
func (j *Journal) JournalResponseBody() int {
	if j.s.opts.Journal.Off {
		return 0
	}
	return j.s.opts.Journal.ResponseBody
}

// journalLocked hands records to the journal's goroutine, in order, and
// returns the sequence number of the last.
func (j *Journal) journalLocked(recs ...journalRec) uint64 {
	if j.stopped || j.s.diskFull {
		return j.seq // a nearly full disk keeps no history: space is for webhooks
	}
	j.pending = append(j.pending, recs...)
	j.seq += uint64(len(recs))
	j.cond.Signal()
	return j.seq
}

// journalAcceptedLocked hands the journal the accepted records of a
// round's new messages, before they are announced: whatever the
// dispatcher records of them comes after. Each message remembers its
// record's number, so that it leaves the queue only once the record is
// durable (waitAccepted).
func (j *Journal) journalAcceptedLocked(batch []op) {
	if j.s.opts.Journal.Off {
		return
	}
	for _, o := range batch {
		if o.adds() && o.base().err == nil {
			m := o.base().msg
			m.jseq = j.journalLocked(j.acceptedRecLocked(o, m))
			if r, ok := reliveRec(m); ok {
				j.journalLocked(r)
			}
		}
	}
}

// outcomes are the journal's records of the messages a round removes
// from the queue.
func (j *Journal) outcomes(batch []op) []journalRec {
	var out []journalRec
	now := j.s.opts.Now()
	for _, o := range batch {
		if o.base().err != nil {
			continue
		}
		switch o := o.(type) {
		case *deleteOp:
			if o.to != "" {
				out = append(out, outcomeRec(o.msg, OutcomeHandedOff, o.to, now))
			} else {
				r := outcomeRec(o.msg, OutcomeDelivered, "", now)
				r.e.Final = o.msg.final
				out = append(out, r)
			}
		case *buryOp:
			out = append(out, outcomeRec(o.msg, OutcomeDead, o.reason, now))
		case *dropOp:
			out = append(out, outcomeRec(o.msg, OutcomePurged, o.by, now))
		}
	}
	return out
}

// journalRound hands the journal the outcomes of a round, before its
// queue write, and waits until the accepted record of every message the
// round removes is durable: a message never leaves the queue before its
// history is kept. (It has been, unless the message is delivered within
// a journal commit of its append.) The outcomes themselves are not waited
// for: a crash may lose those of the last commit, never a webhook.
func (j *Journal) journalRound(batch []op) {
	if j.s.opts.Journal.Off {
		return
	}
	recs := j.outcomes(batch)
	for i := range recs {
		recs[i].whole = recs[i].e.ID <= j.from
	}
	var need uint64
	for _, o := range batch {
		if m := o.base().msg; m != nil && o.shrinks() && m.jseq > need {
			need = m.jseq
		}
	}
	j.s.mu.Lock()
	defer j.s.mu.Unlock()
	for i := range recs {
		j.outcomeCoalesceLocked(&recs[i])
	}
	j.journalLocked(recs...)
	j.waitJournalLocked(need)
}

// waitJournalLocked waits until the journal's records up to seq are
// durable.
func (j *Journal) waitJournalLocked(seq uint64) {
	if j.durable >= seq || j.stopped {
		return
	}
	j.waiting++
	j.cond.Broadcast() // the writer stops lingering
	for j.durable < seq && !j.stopped {
		j.cond.Wait()
	}
	j.waiting--
}

// journalLinger is how long the journal's records wait for company
// before they are committed, when nobody waits for them: each commit
// costs two fsyncs of the kept database (its value log and WAL), on the
// disk the queue's commits wait for, and a webhook's 202 waits for its
// queue commit alone. A delete or a lookup that waits ends the linger, so
// it bounds only how much history a crash can lose. journalBatch ends
// the wait early.
const (
	journalLinger = 100 * time.Millisecond
	journalBatch  = 8192
)

// journalLoop is the journal's writer: it commits whatever records have
// accumulated in one kept transaction (group commit), in the order they
// came, until the spool closes and everything is written.
func (j *Journal) journalLoop() {
	defer close(j.done)
	linger := time.AfterFunc(time.Hour, func() {
		j.s.mu.Lock()
		j.lingerUp = true
		j.cond.Broadcast()
		j.s.mu.Unlock()
	})
	linger.Stop()
	j.s.mu.Lock()
	defer j.s.mu.Unlock()
	for {
		for len(j.pending) == 0 && !j.closing {
			j.cond.Wait()
		}
		if j.waiting == 0 && j.soon <= j.durable && !j.closing && len(j.pending) < journalBatch {
			j.lingerUp = false
			linger.Reset(cmp.Or(j.s.opts.journalLinger, journalLinger))
			for !j.lingerUp && j.waiting == 0 && j.soon <= j.durable && !j.closing && len(j.pending) < journalBatch {
				j.cond.Wait()
			}
			linger.Stop()
		}
		if len(j.pending) == 0 {
			j.stopped = true
			j.cond.Broadcast()
			return
		}
		recs, upTo := j.pending, j.seq
		j.pending = nil
		j.s.mu.Unlock()
		var err error
		if j.journalRoom(len(recs)) {
			err = j.writeJournal(recs)
		}
		j.s.mu.Lock()
		if err != nil && !j.failed.Swap(true) {
			j.s.log.Error("spool: journal write failed; history is missing for some webhooks (logged once)", "error", errText(err))
		}
		j.durable = upTo // or failed: nothing waits for it any longer
		j.cond.Broadcast()
	}
}

// journalRoom reports whether n records fit above spool.min_free, with a
// transaction's worth to spare: history never takes the room that keeps
// webhooks coming (the writer's checks do not count the journal's
// writes). A batch that does not fit is dropped, and logged once a spell.
func (j *Journal) journalRoom(n int) bool {
	room, limited := j.s.headroom()
	if !limited || room >= int64(n)*512+txnBudget {
		j.short.Store(false)
		return true
	}
	if !j.short.Swap(true) {
		j.s.log.Warn("spool: too little disk space above spool.min_free for the journal; history is not kept until there is", "records", n, "room", room)
	}
	return false
}

// hurryLocked ends the journal's linger when m's accepted record is not
// durable yet: an attempt of m has begun, and its delete will wait for
// that record (journalRound). Committed now, the record becomes durable
// while the attempt is on the wire, not after it, with the delivery's slot
// held and the queue's writer waiting.
func (j *Journal) hurryLocked(m *Message) {
	if m.jseq <= j.durable || m.jseq <= j.soon {
		return
	}
	j.soon = m.jseq
	j.cond.Broadcast()
}

// journalSync waits until every record handed to the journal so far is
// durable: a lookup sees what happened before it.
func (j *Journal) journalSync() {
	j.s.mu.Lock()
	defer j.s.mu.Unlock()
	j.waitJournalLocked(j.seq)
}

// closeJournal writes what the journal still has, and stops its writer.
func (j *Journal) closeJournal() {
	if j.s.opts.Journal.Off {
		return
	}
	j.stopIndexBuild()
	j.s.mu.Lock()
	j.closing = true
	j.cond.Broadcast()
	j.s.mu.Unlock()
	<-j.done
}

// writeJournal commits recs to the kept database, in as few transactions
// as Badger allows.
func (j *Journal) writeJournal(recs []journalRec) error {
	txn := j.s.kept.NewTransaction(true)
	defer func() { txn.Discard() }()
	var grow, entries int64
	flush := func() error {
		if err := txn.Commit(); err != nil {
			return err
		}
		j.bytes.Add(grow)
		j.entries.Add(entries)
		grow, entries = 0, 0
		txn = j.s.kept.NewTransaction(true)
		return nil
	}
	set := func(r *journalRec) error {
		if err := txn.Set(r.key, r.val); err != nil {
			return err
		}
		for _, k := range r.index {
			if err := txn.Set(k, nil); err != nil {
				return err
			}
		}
		for _, k := range r.unindex {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		return nil
	}
	legacy := !j.indexed.Load()
	for _, r := range recs {
		if r.merge {
			mergeEntry(txn, r.e, r.replaced)
		}
		r.encode(legacy)
		err := set(&r)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err = flush(); err == nil {
				err = set(&r)
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

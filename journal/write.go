package journal

import (
	"cmp"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/spool"
)

// Journal is the history of every webhook, kept in the spool's kept
// database: records waiting for the next round, and what the journal
// holds. st is the queue it keeps the history of. OpenSpool opens it
// with its spool.
type Journal struct {
	st       store
	kept     *badger.DB // where the journal's keys are, beside the dead letters
	opts     Options
	log      *slog.Logger
	now      func() time.Time
	instance uint64 // the spool's (see spool.Ref)

	// mu is the spool's mutex: the spool's writer hands the journal a
	// settled round under it (History.Settled), and the journal's state
	// marked so is guarded by it. One lock, not two, on the path of every
	// round and every attempt.
	mu *sync.Mutex

	// Guarded by mu: records for the journal's writer (journalLoop),
	// numbered in order; seq is the last handed over, durable the last
	// committed.
	pending          []journalRec
	seq, durable     uint64
	cond             *sync.Cond // on mu: the writer waits for records, waiters for commits
	waiting          int        // goroutines waiting for a commit: it goes at once
	lingerUp         bool       // the writer's linger is over
	closing, stopped bool
	done             chan struct{}
	sweepStop        chan struct{} // Close stops sweepLoop
	sweepDone        chan struct{} // and waits for it

	bytes   atomic.Int64 // keys and values kept, about
	entries atomic.Int64
	failed  atomic.Bool // a journal commit failed: logged once
	// indexed: the indexes of index.go are complete, and List
	// reads them.
	indexed atomic.Bool
	// acceptedUpTo: ids at or below it were accepted by a hookpace that
	// wrote an accepted record at ingest (keyJournalAccepted).
	acceptedUpTo uint64
	build        indexBuild // index_build.go
	// oldest: the Accepted of the oldest entry, Unix nanoseconds, as the
	// last sweep (or Open) saw it: the span the journal's rate is
	// measured over.
	oldest   atomic.Int64
	capBinds atomic.Bool // the sweep removes entries younger than retain: logged once a spell
	short    atomic.Bool // too little room above min_free: records dropped (logged once a spell)

	// queued: the queued webhooks, for listings and lookups
	// (queued_index.go); nil with the journal off. Guarded by
	// mu.
	queued *queuedIndex
	// relived: the later lives of webhooks queued again, while queued
	// (replays.go).
	relived queuedLives

	// aheadLast: the id of the last record ahead this journal gave
	// (ahead.go). Guarded by mu.
	aheadLast uint64

	// Guarded by mu: the ids above coalFrom, once coalSet, are of
	// webhooks this run accepted, of which the journal keeps no note
	// (coalesce.go).
	coalFrom uint64
	coalSet  bool
}

// Instance is the spool part of the ids of the webhooks the journal
// keeps (see Ref).
func (j *Journal) Instance() uint64 { return j.instance }

// journalRec is one journal write: a Set of key to val. grow is what it
// adds to the journal's bytes; entry says it is a new entry. An entry's
// record is made from e by encode, off the writer's path: e is a copy of
// what the message said when the record was taken (the dispatcher may
// change the message since).
type journalRec struct {
	key, val []byte
	index    [][]byte // index keys to set (index.go; encode)
	unindex  [][]byte // and to delete
	grow     int64
	entry    bool
	// accepted: the webhook may have an accepted record of a journal
	// that wrote one at ingest (keyJournalAccepted), whose queued index
	// key the outcome deletes.
	accepted bool
	e        *Entry // to encode
	// merge: what only the entry's record says (a note's coalesce key
	// and replacements, an earlier delivery) is read from it
	// (mergeEntry), the webhook being of an earlier run.
	merge bool
	// needs: the record is written only while this key is there (a
	// replay's link, under its first entry).
	needs []byte
	// ahead: the id of the record ahead in the queue that holds the
	// entry's outcome (ahead.go), dropped once this record is durable; 0
	// for none.
	ahead uint64
}

// outcomeRec is m's entry with its outcome.
func outcomeRec(m *spool.Message, outcome, reason string, at time.Time) journalRec {
	e := entryOf(m)
	e.Outcome, e.OutcomeAt, e.Reason = outcome, at, spool.Clip(reason)
	return journalRec{e: e}
}

// encode makes the record of an entry: its URL redacted, its index keys,
// and what it adds to the journal. An entry with an outcome gets every
// index key (the webhook had none while queued: the queue listed it).
// legacy: the keys of the indexes before index.go too, while
// those are still read (index_build.go).
func (r *journalRec) encode(legacy bool) {
	if r.e == nil {
		return
	}
	r.key = journalKey(r.e.ID)
	if r.val == nil { // else encoded already (Leaving), and not merged since
		r.e.URL = spool.RedactURL(r.e.URL)
		r.val = r.e.encode()
	}
	r.grow = int64(len(r.key) + len(r.val))
	if r.e.Outcome == "" {
		r.e = nil
		return
	}
	r.entry = true
	r.index = entryIndex(r.e)
	if legacy {
		r.index = append(r.index, hostIndexKey(r.e.Host, r.e.ID), outcomeIndexKey(r.e.Outcome, r.e.ID))
	}
	if r.accepted {
		r.unindex = append(r.unindex, queuedIndexKey(r.e))
	}
	r.grow += keysLen(r.index)
	r.e = nil
}

// RecordAttempt adds an attempt of m to the journal. The answer's secret
// headers are redacted and its body cut to Options.ResponseBody.
func (j *Journal) RecordAttempt(m *spool.Message, a spool.Attempt) {
	if j.opts.Off {
		return
	}
	a.Header = spool.RedactHeader(a.Header)
	if len(a.Body) > j.opts.ResponseBody {
		a.Body = a.Body[:j.opts.ResponseBody]
	}
	a.Error = spool.Clip(a.Error)
	if a.Error == "" && a.Status >= 200 && a.Status < 300 {
		// It delivered m: it goes with the outcome, in m's entry (the
		// delete follows, and reads it after the delete's submit).
		m.Final = &a
		return
	}
	k, v := attemptKey(m.ID, a.At), encodeAttempt(&a)
	j.mu.Lock()
	defer j.mu.Unlock()
	j.journalLocked(journalRec{key: k, val: v, grow: int64(len(k) + len(v))})
}

// JournalResponseBody is how many bytes of a partner's answer an attempt
// keeps (0: the journal is off).
func (j *Journal) JournalResponseBody() int {
	if j.opts.Off {
		return 0
	}
	return j.opts.ResponseBody
}

// journalLocked hands records to the journal's goroutine, in order, and
// returns the sequence number of the last.
func (j *Journal) journalLocked(recs ...journalRec) uint64 {
	if !j.keepsLocked() {
		return j.seq
	}
	j.pending = append(j.pending, recs...)
	j.seq += uint64(len(recs))
	j.cond.Signal()
	return j.seq
}

// Settled takes a round whose queue write is durable, before its new
// messages are announced (History): the queued webhooks' index
// (queued_index.go) takes the new ones and forgets those that
// left. Of the new ones the journal writes nothing: the queue's record
// is the accepted record, with its coalesce key and replacements
// (coalesce.go). It knows a webhook queued again as a later life of its
// first (replays.go). mu is held.
func (j *Journal) Settled(round []spool.Change) {
	for _, c := range round {
		m := c.Msg
		if c.Gone {
			j.queued.remove(m.ID, m.Header.Get("Idempotency-Key"))
			if origin := reliveOrigin(m); origin != 0 {
				j.relived.remove(origin, m.ID)
			}
			continue
		}
		j.queued.add(m.ID, m.Host, m.Lane(), m.Header.Get("Idempotency-Key"))
		j.noteCoalesceLocked(c)
		if origin := reliveOrigin(m); origin != 0 {
			j.relived.add(origin, m.ID)
		}
	}
}

// Leaving takes the outcomes of a round, before its queue write
// (History), and returns each outcome's record for that write to keep in
// the queue (ahead.go) until the journal has made it durable here: so
// that what is not in the journal is still in the queue, the webhook or
// its outcome, and the round waits for no sync of the journal's. A crash
// between the journal's write and the queue's leaves a delivered webhook
// in both: it is delivered again (at least once), and its entry is
// rewritten with the second outcome. A later life of a webhook queued
// again is linked from its first entry here, with its own.
func (j *Journal) Leaving(gone []spool.Gone) []spool.Ahead {
	if len(gone) == 0 {
		return nil
	}
	now := j.now()
	recs := make([]journalRec, len(gone))
	for i, g := range gone {
		recs[i] = outcomeRec(g.Msg, g.Outcome, g.Reason, now)
		if g.Outcome == spool.OutcomeDelivered {
			recs[i].e.Final = g.Msg.Final
		}
	}
	for _, g := range gone {
		if origin := reliveOrigin(g.Msg); origin != 0 {
			recs = append(recs, reliveRec(origin, g.Msg.ID))
		}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.keepsLocked() {
		return nil
	}
	for i := range gone {
		r := &recs[i]
		j.outcomeCoalesceLocked(r)
		if r.e.ID <= j.acceptedUpTo {
			r.accepted, r.merge = true, true
		}
		r.e.URL = spool.RedactURL(r.e.URL)
		r.val = r.e.encode()
	}
	ahead := j.aheadLocked(recs[:len(gone)])
	j.journalLocked(recs...)
	return ahead
}

// keepsLocked reports whether records handed over now are kept: not once
// the writer has stopped, nor on a nearly full disk (space is for
// webhooks).
func (j *Journal) keepsLocked() bool {
	return !j.stopped && !j.st.DiskFullLocked()
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
		j.mu.Lock()
		j.lingerUp = true
		j.cond.Broadcast()
		j.mu.Unlock()
	})
	linger.Stop()
	j.mu.Lock()
	defer j.mu.Unlock()
	for {
		for len(j.pending) == 0 && !j.closing {
			j.cond.Wait()
		}
		if j.waiting == 0 && !j.closing && len(j.pending) < journalBatch {
			j.lingerUp = false
			linger.Reset(cmp.Or(j.opts.linger, journalLinger))
			for !j.lingerUp && j.waiting == 0 && !j.closing && len(j.pending) < journalBatch {
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
		j.mu.Unlock()
		var err error
		if j.journalRoom(len(recs)) {
			var vlog bool
			vlog, err = j.writeJournal(recs)
			err = errors.Join(err, j.st.SyncKept(vlog))
		}
		// The outcomes ahead in the queue are dropped once durable here,
		// or once their write failed (logged: the history lacks them).
		j.st.DropAhead(aheadIDs(recs))
		j.mu.Lock()
		if err != nil && !j.failed.Swap(true) {
			j.log.Error("spool: journal write failed; history is missing for some webhooks (logged once)", "error", spool.ErrText(err))
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
	room, limited := j.st.Headroom()
	if !limited || room >= int64(n)*512+spool.TxnBudget {
		j.short.Store(false)
		return true
	}
	if !j.short.Swap(true) {
		j.log.Warn("spool: too little disk space above spool.min_free for the journal; history is not kept until there is", "records", n, "room", room)
	}
	return false
}

// Sync waits until every record handed to the journal so far is
// durable: a lookup sees what happened before it.
func (j *Journal) Sync() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.waitJournalLocked(j.seq)
}

// closeJournal writes what the journal still has, and stops its writer.
func (j *Journal) closeJournal() {
	if j.opts.Off {
		return
	}
	j.stopIndexBuild()
	j.mu.Lock()
	j.closing = true
	j.cond.Broadcast()
	j.mu.Unlock()
	<-j.done
}

// writeJournal commits recs to the kept database, in as few transactions
// as Badger allows. vlog says a value may have gone to the value log.
func (j *Journal) writeJournal(recs []journalRec) (vlog bool, err error) {
	txn := j.kept.NewTransaction(true)
	defer func() { txn.Discard() }()
	var grow, entries int64
	flush := func() error {
		if err := txn.Commit(); err != nil {
			return err
		}
		j.bytes.Add(grow)
		j.entries.Add(entries)
		grow, entries = 0, 0
		txn = j.kept.NewTransaction(true)
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
		if r.needs != nil {
			if _, err := txn.Get(r.needs); err != nil {
				continue
			}
		}
		again := false
		if r.merge {
			var changed bool
			changed, again = mergeEntry(txn, r.e)
			if changed {
				r.val = nil // encoded anew
			}
			// A merge may have written the earlier final attempt.
			vlog = vlog || changed
		}
		r.encode(legacy)
		if again { // its very outcome, written before: counted then
			r.grow, r.entry = 0, false
		}
		vlog = vlog || len(r.key)+len(r.val) >= spool.ValueThreshold
		err := set(&r)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err = flush(); err == nil {
				err = set(&r)
			}
		}
		if err != nil {
			return vlog, err
		}
		grow += r.grow
		if r.entry {
			entries++
		}
	}
	return vlog, flush()
}

// aheadIDs are the ids of the records ahead in the queue that hold recs'
// outcomes.
func aheadIDs(recs []journalRec) []uint64 {
	var ids []uint64
	for _, r := range recs {
		if r.ahead != 0 && (len(ids) == 0 || ids[len(ids)-1] != r.ahead) {
			ids = append(ids, r.ahead)
		}
	}
	return ids
}

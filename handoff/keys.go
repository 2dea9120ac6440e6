package handoff

import (
	"context"
	"net/http"
	"strconv"
	"sync"

	"github.com/hookpace/hookpace/spool"
)

// Bounds of one key's batch, here and at the receiver, which holds it in
// memory until its last chunk: a key past them stays here whole
// (KeptTooLarge).
const (
	MaxBatchBytes = 64 << 20
	maxRestarts   = 5 // a key sent again this often (409, a receiver that lost it) stays here
	// maxHeld bounds the bodies held here for the keys under way (each
	// is held until its batch is stored there, to be sent again if the
	// receiver loses it): a hand-off of a large ordered backlog reads it
	// no faster than the keys go.
	maxHeld = 256 << 20
)

// Why a key's webhooks stay here (Result.Kept): KeptKeyWhole for those
// of a key that went no further, the one whose answer stopped it
// counted under that answer's reason; KeptTooLarge for a key past
// MaxBatchBytes or MaxBatchLen; KeptHeldTooMuch for one that would take
// the bodies held for the keys under way past maxHeld.
const (
	KeptKeyWhole    = "key_kept_whole"
	KeptTooLarge    = "key_too_large"
	KeptHeldTooMuch = "keys_held_too_much"
	keptLost        = "batch_lost" // the receiver lost the batch maxRestarts times
)

// restartBatch and storedAlone are stage's verdicts besides a reason.
const (
	restartBatch = "\x00restart"
	storedAlone  = "\x00stored"
)

// maxKeyLogs bounds the lines that name a key kept here, per hand-off;
// the rest are counted in Result.
const maxKeyLogs = 50

// keyBatch is one ordering key on its way: the webhooks sent so far, in
// order, staged at the receiver and all still here. One worker owns it.
type keyBatch struct {
	id       string           // the batch id of this attempt
	msgs     []*spool.Message // staged there, in order; none deleted here
	bytes    int
	state    HostState // carried on each attempt's first chunk
	failed   bool      // the key stays here: its later webhooks too
	legacy   bool      // the target stores webhooks one by one (an older hookpace)
	split    bool      // the receiver stored the key's first ones (a commit it cut short)
	restarts int
}

func newKeyBatch(st HostState) *keyBatch { return &keyBatch{id: NewBatchID(), state: st} }

// add sends m, the key's next webhook, as the batch's next chunk, and
// reports whether it went (staged there, or stored by an older hookpace).
func (s *sender) add(ctx context.Context, kb *keyBatch, m *spool.Message, t *tally) bool {
	switch {
	case kb.failed:
		t.record(m, "", keptBehind)
		return false
	case kb.legacy:
		newID, reason := s.handOff(ctx, m, HostState{})
		t.record(m, newID, reason)
		if reason != "" {
			kb.failed = true
			t.keySplit(m, reason, "an older hookpace stored its first webhooks one by one")
		}
		return reason == ""
	case len(kb.msgs) >= MaxBatchLen || kb.bytes+len(m.Body) > MaxBatchBytes:
		kb.msgs = append(kb.msgs, m)
		s.keep(kb, KeptTooLarge, t)
		return false
	case s.held.Add(int64(len(m.Body))) > maxHeld:
		s.held.Add(-int64(len(m.Body)))
		kb.msgs = append(kb.msgs, m)
		s.keep(kb, KeptHeldTooMuch, t)
		return false
	}
	kb.msgs = append(kb.msgs, m)
	kb.bytes += len(m.Body)
	switch why := s.stage(ctx, kb, len(kb.msgs)-1, t); why {
	case "", storedAlone:
		return !kb.failed
	case restartBatch:
		return s.restart(ctx, kb, t)
	default:
		s.keep(kb, why, t)
		return false
	}
}

// stage sends kb's chunk i and says what came of it: "" (staged there),
// storedAlone (an older hookpace stored it: it is deleted here, and the
// key goes one by one from now on), restartBatch (the receiver lost the
// batch), or why the key stays here.
func (s *sender) stage(ctx context.Context, kb *keyBatch, i int, t *tally) string {
	m := kb.msgs[i]
	st := HostState{}
	if i == 0 {
		st = kb.state
	}
	resp, kept := s.exchange(ctx, m, st, &Batch{ID: kb.id, N: i})
	switch {
	case kept != "":
		return kept
	case resp.status == http.StatusOK && resp.staged == i+1:
		return ""
	case resp.status == http.StatusConflict:
		return restartBatch
	case resp.status == http.StatusAccepted && i == 0 && resp.staged < 0 && resp.stored < 0:
		// No hookpace that stages keys would store a chunk before the
		// batch's last: this one predates batches.
		newID, reason := s.stored(m, resp)
		t.record(m, newID, reason)
		s.held.Add(-int64(kb.bytes))
		kb.msgs, kb.bytes = nil, 0
		if reason != "" {
			kb.failed = true
			return storedAlone
		}
		kb.legacy = true
		s.legacyOnce.Do(func() {
			s.log.Warn("handoff: the target stores an ordering key's webhooks one by one (an older hookpace): "+
				"a key cut short by the budget is split between the two", "target", s.target.Redacted())
		})
		return storedAlone
	default:
		return "status_" + strconv.Itoa(resp.status)
	}
}

// restart sends every webhook of kb again under a new batch id, for a
// receiver that lost the batch, and reports whether they all went.
func (s *sender) restart(ctx context.Context, kb *keyBatch, t *tally) bool {
	for {
		kb.restarts++
		if kb.restarts > maxRestarts {
			s.keep(kb, keptLost, t)
			return false
		}
		kb.id = NewBatchID()
		again := false
		for i := range kb.msgs {
			why := s.stage(ctx, kb, i, t)
			if why == restartBatch {
				again = true
				break
			}
			if why != "" {
				s.keep(kb, why, t)
				return false
			}
		}
		if !again {
			return true
		}
	}
}

// commit ends kb's batch: its last webhook again, marked last, which the
// receiver answers once it has stored them all. Only then are they
// deleted here. A receiver that stored the first ones and refused the
// rest says how many it stored: those are deleted here, and the rest go
// as a new batch.
func (s *sender) commit(ctx context.Context, kb *keyBatch, t *tally) {
	for !kb.failed && !kb.legacy && len(kb.msgs) > 0 {
		last := len(kb.msgs) - 1
		resp, kept := s.exchange(ctx, kb.msgs[last], HostState{}, &Batch{ID: kb.id, N: last, Last: true})
		switch {
		case kept != "":
			first := kb.msgs[0]
			s.keep(kb, kept, t)
			if kept == "connection_error" || kept == "timeout" {
				s.log.Warn("handoff: an ordering key's last chunk went unanswered: if the other hookpace stored the key "+
					"before the connection was lost, it is there whole as well (delivered twice, in order on each side)",
					"host", first.Host, "ordering_key", first.Ordering, "target", s.target.Redacted())
			}
		case resp.status == http.StatusAccepted && resp.stored == len(kb.msgs):
			s.deleteAll(kb.msgs, resp, t)
			s.held.Add(-int64(kb.bytes))
			kb.msgs, kb.bytes = nil, 0
			t.keyWent()
			return
		case resp.status == http.StatusConflict:
			s.restart(ctx, kb, t)
		case resp.stored > 0 && resp.stored < len(kb.msgs):
			// The receiver holds the key's first ones, released for
			// delivery: the rest must follow them there, not stay here.
			s.deleteAll(kb.msgs[:resp.stored], answer{}, t)
			for _, m := range kb.msgs[:resp.stored] {
				kb.bytes -= len(m.Body)
				s.held.Add(-int64(len(m.Body)))
			}
			kb.msgs = kb.msgs[resp.stored:]
			kb.split = true
			kb.restarts = 0
			s.restart(ctx, kb, t)
		default:
			s.keep(kb, "status_"+strconv.Itoa(resp.status), t)
		}
	}
}

// keep leaves kb's key here whole: the webhooks sent so far (staged at
// the receiver, which drops them) and those still to come. The last one
// sent is counted under why, the others as KeptKeyWhole.
func (s *sender) keep(kb *keyBatch, why string, t *tally) {
	kb.failed = true
	s.held.Add(-int64(kb.bytes))
	kb.bytes = 0
	if len(kb.msgs) == 0 {
		return
	}
	m := kb.msgs[0]
	for i, x := range kb.msgs {
		reason := KeptKeyWhole
		if i == len(kb.msgs)-1 {
			reason = why
		}
		t.record(x, "", reason)
	}
	if kb.split {
		t.keySplit(m, why, "the other hookpace stored its first webhooks and refused the next")
	} else {
		t.keyKept(m, len(kb.msgs), why)
	}
	kb.msgs = nil
}

// deleteAll deletes ms here, stored there: deleteTogether at a time,
// so that one commit usually makes each group durable.
func (s *sender) deleteAll(ms []*spool.Message, resp answer, t *tally) {
	for len(ms) > deleteTogether {
		s.deleteSome(ms[:deleteTogether], answer{}, t)
		ms = ms[deleteTogether:]
	}
	s.deleteSome(ms, resp, t)
}

// deleteTogether is how many deletes a key's commit submits at once.
const deleteTogether = 512

// deleteSome deletes ms together; the last is resp's id there.
func (s *sender) deleteSome(ms []*spool.Message, resp answer, t *tally) {
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() {
			id := ""
			if i == len(ms)-1 {
				id = resp.id
			}
			to := "hookpace at " + s.target.Host + " with its ordering key"
			if id != "" {
				to += " (last as " + id + ")"
			}
			if err := s.queue.HandedOff(m, to); err != nil {
				s.log.Error("handoff: stored there but not deleted here; it will be delivered twice",
					"id", m.Ref().String(), "error", err)
				t.record(m, "", "local_delete_failed")
				return
			}
			t.record(m, id, "")
		})
	}
	wg.Wait()
}

// keyWent counts a key handed off whole.
func (t *tally) keyWent() {
	t.mu.Lock()
	t.res.Keys++
	t.mu.Unlock()
}

// keyKept counts a key left here whole and says why, in one line per
// key (up to maxKeyLogs).
func (t *tally) keyKept(m *spool.Message, n int, why string) {
	t.mu.Lock()
	t.res.KeysKept++
	logIt := t.res.KeysKept <= maxKeyLogs
	t.mu.Unlock()
	if logIt {
		t.s.log.Warn("handoff: ordering key kept here whole", "host", m.Host, "fairness_key", m.Fairness,
			"ordering_key", m.Ordering, "sent", n, "from", m.Ref().String(), "reason", why, "target", t.s.target.Redacted(),
			"note", "none of it is stored there; it is delivered from here after a restart on this volume")
	}
}

// keySplit counts a key whose first webhooks are stored there while the
// rest stay here, and says so.
func (t *tally) keySplit(m *spool.Message, why, how string) {
	t.mu.Lock()
	t.res.KeysSplit++
	t.mu.Unlock()
	t.s.log.Error("handoff: an ordering key split: "+how+"; the rest stay here, and their order against the ones there "+
		"is no longer kept", "host", m.Host, "fairness_key", m.Fairness, "ordering_key", m.Ordering,
		"kept_from", m.Ref().String(), "reason", why, "target", t.s.target.Redacted())
}

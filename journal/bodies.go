package journal

// Request bodies in the journal (journal.bodies: true): a
// delivered webhook's whole request, kept so that it can be sent again
// (Resend). Each is one record beside the webhook's attempts,
//
//	dead/   a <id:8> 'b'          the request as the app sent it: message record (method, whole URL, headers, body)
//
// under the attempts' prefix, so that the sweep removes it with its entry
// and the journal's budget counts it; reading attempts passes over it
// (its key is not an attempt's length). It is written when the webhook is
// delivered, before the outcome that ends its entry.

import (
	"context"
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/spool"
)

// ErrNoBody: the journal keeps no request for that webhook (it was not
// delivered with journal.bodies on, or its entry is gone).
var ErrNoBody = errors.New("no request body kept for it (journal.bodies was off when it was delivered, or its entry is gone)")

func bodyKey(id uint64) []byte { return append(attemptPrefix(id), 'b') }

// JournalBody keeps m's request in the journal, when journal.bodies is on
// (Options.Bodies); the dispatcher calls it as m is delivered.
func (j *Journal) JournalBody(m *spool.Message) {
	if j.opts.Off || !j.opts.Bodies {
		return
	}
	k, v := bodyKey(m.ID), m.Encode(nil)
	j.mu.Lock()
	defer j.mu.Unlock()
	j.journalLocked(journalRec{key: k, val: v, grow: int64(len(k) + len(v))})
}

// journalBody reads the request kept for the webhook with entry e.
func (j *Journal) journalBody(e *Entry) (*spool.Message, error) {
	var m *spool.Message
	err := j.kept.View(func(txn *badger.Txn) error {
		item, err := txn.Get(bodyKey(e.ID))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return ErrNoBody
		} else if err != nil {
			return err
		}
		return item.Value(func(v []byte) (err error) {
			m, err = spool.DecodeMessage(e.Host, e.ID, v)
			return err
		})
	})
	return m, err
}

// Resend queues a delivered webhook again, from the request the journal
// kept (journal.bodies): a new message at the tail of its host's queue,
// with the same method, URL, headers and body, under the id the app got
// (Origin), as a dead-letter replay is, and its max_age counts from now.
// It is admitted like any webhook: a full spool refuses it (*FullError).
func (j *Journal) Resend(ctx context.Context, r spool.Ref) (*spool.Message, error) {
	v, err := j.Lookup(r)
	if err != nil {
		return nil, err
	}
	if v.State != spool.OutcomeDelivered {
		return nil, fmt.Errorf("%s is %s, not delivered: only a delivered webhook is sent again (a dead letter: hookpace dead replay)", r, stateText(v.State))
	}
	kept, err := j.journalBody(&v.Entry)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r, err)
	}
	e := &v.Entry
	m := &spool.Message{Host: kept.Host, Method: kept.Method, URL: kept.URL, Header: kept.Header, Body: kept.Body,
		Enqueued: j.now(), Origin: e.ID, OriginSpool: e.OriginSpool,
		Fairness: kept.Fairness, Priority: kept.Priority, Ordering: kept.Ordering}
	if e.Origin != 0 {
		m.Origin = e.Origin
	}
	if err := j.st.Append(ctx, m, 0); err != nil {
		return nil, err
	}
	return m, nil
}

func stateText(state string) string {
	if state == "" {
		return "queued"
	}
	return state
}

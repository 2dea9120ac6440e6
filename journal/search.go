package journal

// Searching the journal: List's Idempotency and Contains (Query). An
// idempotency key is in every entry's head. Contains looks at what the
// journal, or the spool, still has of a webhook's request: its URL (as
// kept: query values redacted), its headers as kept (secret values
// redacted), its idempotency and coalesce keys, and its body where one
// is kept: in the queue while queued, in the dead letter while dead, in
// the journal once delivered with journal.bodies on.

import (
	"bytes"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/spool"
)

// containsText reports whether the request of the webhook with entry e
// (full: its headers read) holds text.
func (j *Journal) containsText(txn *badger.Txn, e *Entry, text string) bool {
	if entryContains(e, text) {
		return true
	}
	body := j.keptBody(txn, e)
	return body != nil && bytes.Contains(body, []byte(text))
}

// entryContains reports whether e's URL, keys or headers (as kept) hold
// text.
func entryContains(e *Entry, text string) bool {
	if strings.Contains(e.URL, text) || strings.Contains(e.Idempotency, text) || strings.Contains(e.Coalesce, text) {
		return true
	}
	for k, vs := range e.Header {
		if strings.Contains(k, text) {
			return true
		}
		for _, v := range vs {
			if strings.Contains(v, text) {
				return true
			}
		}
	}
	return false
}

// keptBody is the body of e's request where the spool still has it, or
// nil.
func (j *Journal) keptBody(txn *badger.Txn, e *Entry) []byte {
	switch e.Outcome {
	case "":
		l := spool.Lane{Key: e.Fairness, Priority: e.Priority}
		if e.Ordering != "" {
			l.Priority = spool.PriorityNormal
		}
		m, err := j.st.Get(e.Host, l, e.ID)
		if err != nil {
			return nil
		}
		return m.Body
	case spool.OutcomeDead:
		item, err := txn.Get(spool.DeadKey(e.ID))
		if err != nil {
			return nil
		}
		var body []byte
		item.Value(func(v []byte) error {
			if d, err := spool.DecodeDead(e.ID, v); err == nil {
				body = d.Message.Body
			}
			return nil
		})
		return body
	case spool.OutcomeDelivered:
		item, err := txn.Get(bodyKey(e.ID))
		if err != nil {
			return nil
		}
		var body []byte
		item.Value(func(v []byte) error {
			if m, err := spool.DecodeMessage(e.Host, e.ID, v); err == nil {
				body = m.Body
			}
			return nil
		})
		return body
	}
	return nil
}

// matchItem decodes the entry of the journal's item for id and reports
// whether q selects it: its head alone, unless q searches text.
func (j *Journal) matchItem(txn *badger.Txn, q *Query, id uint64, item *badger.Item) (*Entry, bool) {
	var e *Entry
	err := item.Value(func(v []byte) (err error) {
		if q.Contains != "" {
			e, err = decodeEntry(id, v)
		} else {
			e, err = decodeEntryHead(id, v)
		}
		return err
	})
	if err != nil || !q.match(e) {
		return nil, false
	}
	if e.Outcome == "" && q.queue != nil && j.stillQueued(q.queue, e) {
		return nil, false // the queue lists it
	}
	if q.Contains != "" && !j.containsText(txn, e, q.Contains) {
		return nil, false
	}
	e.Header, e.Final = nil, nil // a listing shows neither
	return e, true
}

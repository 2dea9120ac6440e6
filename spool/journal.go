package spool

// The journal (issue 32): what became of every webhook, kept in the kept
// database after it has left the queue.
//
//	dead/   j <id:8>              entry: what was accepted, and its outcome once known
//	dead/   a <id:8> <at:8>       one attempt: when, how long, status, error, answer
//	dead/   h <host> 0x00 <id:8>  the entries of a host, for listing them
//
// Writes are group commits of their own, never one per webhook: the
// journal's writer (journalLoop) commits whatever records have come in
// one kept transaction, after lingering up to journalLinger for company
// unless someone waits, so that its fsyncs stay few and off the queue's
// path. The order makes a crash leave at worst a duplicate delivery or a
// missing outcome, never a webhook without its history:
//   - an accepted record is handed over before its message is announced,
//     and a message leaves the queue only once its accepted record is
//     durable (journalRound; it has been long before, unless the message
//     is delivered within a journal commit of its append); Open writes
//     those of still-queued messages a crash lost (recoverJournal);
//   - an attempt is handed over after its message's accepted record, and
//     commits keep their order: an attempt never appears without its
//     webhook;
//   - an outcome is handed over before the queue write that removes the
//     message, and rewrites the whole entry, accepted part included. A
//     crash may lose the outcomes of the last commit (the webhook then
//     shows as unknown: it left the queue, its outcome not recorded).
//
// The attempt that delivered a webhook is kept in its entry (Entry.Final),
// so a webhook delivered at once costs one journal write.
//
// The journal has its own budget (JournalOptions) and does not count
// toward the spool's limits: history never causes a 429.

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"strings"
	"time"
)

const (
	prefixJournal   = 'j'
	prefixAttempt   = 'a'
	prefixHostIndex = 'h' // h <host> 0x00 <id:8> -> nothing: a host's entries, for List
)

// JournalOptions configure the journal. The zero value keeps it on, with
// the defaults noted.
type JournalOptions struct {
	Off          bool
	Retain       time.Duration // default 14 days
	MaxBytes     int64         // default a quarter of the spool's MaxBytes
	ResponseBody int           // bytes of a partner's answer kept per attempt; default 1 KiB
	Bodies       bool          // keep a delivered webhook's request, to send it again (journal_bodies.go)
}

func (o *JournalOptions) setDefaults(spoolBytes int64) {
	if o.Retain <= 0 {
		o.Retain = 14 * 24 * time.Hour
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = spoolBytes / 4
	}
	if o.ResponseBody <= 0 {
		o.ResponseBody = 1 << 10
	}
}

// Outcomes of a journal entry.
const (
	OutcomeDelivered = "delivered"
	OutcomeDead      = "dead"
	OutcomePurged    = "purged"
	OutcomeHandedOff = "handed_off"
	OutcomeCoalesced = "coalesced"
)

// Entry is one webhook in the journal. URLs are kept with their query
// values and any password redacted.
type Entry struct {
	ID          uint64 // the spool's id
	Origin      uint64 // OriginID when it differs (a replayed dead letter)
	OriginSpool uint64
	Host        string
	Method      string
	URL         string
	Idempotency string
	Size        int
	Accepted    time.Time
	Outcome     string // "" while it is queued
	OutcomeAt   time.Time
	Reason      string // why it died, who purged it, where it went
	// Final is the attempt that delivered it, kept in the entry rather
	// than a record of its own: one write fewer per webhook.
	Final *Attempt
}

// Attempt is one delivery attempt as the journal keeps it.
type Attempt struct {
	At       time.Time
	Duration time.Duration
	Status   int    // 0: no answer
	Error    string // hookpace's reason for anything but a success
	Header   http.Header
	Body     []byte // the first bytes of the answer
	Batch    int    // webhooks sent in the same request (1 alone)
}

const journalVersion = 1

// entryOf is m's entry, its URL as it is.
func entryOf(m *Message) *Entry {
	return &Entry{ID: m.ID, Origin: m.Origin, OriginSpool: m.OriginSpool, Host: m.Host, Method: m.Method,
		URL: m.URL, Idempotency: m.Header.Get("Idempotency-Key"), Size: len(m.Body), Accepted: m.Enqueued}
}

// entryFor is m's entry, its URL redacted.
func entryFor(m *Message) *Entry {
	e := entryOf(m)
	e.URL = RedactURL(e.URL)
	return e
}

func (e *Entry) encode() []byte {
	b := make([]byte, 0, 64+len(e.Host)+len(e.URL)+len(e.Reason)+len(e.Idempotency))
	b = append(b, journalVersion)
	b = binary.AppendUvarint(b, e.Origin)
	b = binary.AppendUvarint(b, e.OriginSpool)
	b = appendString(b, e.Host)
	b = appendString(b, e.Method)
	b = appendString(b, e.URL)
	b = appendString(b, e.Idempotency)
	b = binary.AppendUvarint(b, uint64(e.Size))
	b = binary.AppendVarint(b, unixNano(e.Accepted))
	b = appendString(b, e.Outcome)
	b = binary.AppendVarint(b, unixNano(e.OutcomeAt))
	b = appendString(b, e.Reason)
	if e.Final != nil { // absent from an entry without one
		b = binary.AppendVarint(b, e.Final.At.UnixNano())
		b = append(b, e.Final.encode()...)
	}
	return b
}

func decodeEntry(id uint64, v []byte) (*Entry, error) {
	d := decoder{b: v}
	if ver := d.byte(); ver != journalVersion {
		return nil, fmt.Errorf("journal entry %s: unknown version %d", IDString(id), ver)
	}
	e := &Entry{ID: id, Origin: d.uvarint(), OriginSpool: d.uvarint(), Host: d.string(), Method: d.string(),
		URL: d.string(), Idempotency: d.string(), Size: int(d.uvarint())}
	e.Accepted = timeOf(d.varint())
	e.Outcome = d.string()
	e.OutcomeAt = timeOf(d.varint())
	e.Reason = d.string()
	if d.err != nil {
		return nil, fmt.Errorf("journal entry %s: %w", IDString(id), d.err)
	}
	if len(d.b) > 0 {
		at := d.varint()
		if d.err != nil {
			return nil, fmt.Errorf("journal entry %s: %w", IDString(id), d.err)
		}
		a, err := decodeAttempt(at, d.b)
		if err != nil {
			return nil, fmt.Errorf("journal entry %s: %w", IDString(id), err)
		}
		e.Final = a
	}
	return e, nil
}

func (a *Attempt) encode() []byte {
	b := make([]byte, 0, 32+len(a.Error)+len(a.Body)+64*len(a.Header))
	b = append(b, journalVersion)
	b = binary.AppendVarint(b, int64(a.Duration))
	b = binary.AppendUvarint(b, uint64(a.Status))
	b = appendString(b, a.Error)
	b = binary.AppendUvarint(b, uint64(a.Batch))
	b = binary.AppendUvarint(b, uint64(len(a.Header)))
	for k, vs := range a.Header {
		b = appendString(b, k)
		b = appendString(b, strings.Join(vs, ", "))
	}
	return appendString(b, string(a.Body))
}

func decodeAttempt(at int64, v []byte) (*Attempt, error) {
	d := decoder{b: v}
	if ver := d.byte(); ver != journalVersion {
		return nil, fmt.Errorf("journal attempt: unknown version %d", ver)
	}
	a := &Attempt{At: time.Unix(0, at), Duration: time.Duration(d.varint()), Status: int(d.uvarint()),
		Error: d.string(), Batch: int(d.uvarint())}
	if n := d.uvarint(); n > 0 && n < 1024 {
		a.Header = make(http.Header, n)
		for range n {
			k := d.string()
			a.Header[k] = []string{d.string()}
		}
	}
	a.Body = d.bytes()
	if d.err != nil {
		return nil, fmt.Errorf("journal attempt: %w", d.err)
	}
	return a, nil
}

func timeOf(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

func journalKey(id uint64) []byte { return binary.BigEndian.AppendUint64([]byte{prefixJournal}, id) }

func hostIndexPrefix(host string) []byte { return hostPrefix(prefixHostIndex, host) }

func hostIndexKey(host string, id uint64) []byte {
	return binary.BigEndian.AppendUint64(hostIndexPrefix(host), id)
}

func attemptPrefix(id uint64) []byte { return binary.BigEndian.AppendUint64([]byte{prefixAttempt}, id) }

func attemptKey(id uint64, at time.Time) []byte {
	return binary.BigEndian.AppendUint64(attemptPrefix(id), uint64(at.UnixNano()))
}

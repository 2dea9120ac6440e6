// Package journal keeps what became of every webhook of a spool, in the
// spool's kept database after it has left the queue. The journal is the
// spool's History (OpenSpool): the spool's writer hands it each round.
//
//	dead/   j <id:8>              entry: what was accepted, and its outcome once known
//	dead/   a <id:8> <at:8>       one attempt: when, how long, status, error, answer
//	dead/   x ...                 indexes by time, state, host and idempotency key (index.go)
//	dead/   h <host> 0x00 <id:8>  the older index of a host's entries, read until those are built
//
// The queue's record is the accepted record: a queued webhook has no
// entry, and the journal shows it from the queue (queued.go). Its
// entry and index keys are written when it leaves the queue. Writes are
// group commits of their own, never one per webhook: the journal's
// writer (journalLoop) commits whatever records have come in in one kept
// transaction, after lingering up to journalLinger for company unless
// someone waits. The order makes a crash lose no history:
//   - an outcome is handed over before the queue write that removes its
//     webhook, and that write keeps it in the queue, as an outcome ahead
//     (ahead.go), until the journal's commit of it is durable
//     (Journal.Leaving): what is not in the journal is still in the
//     queue, the webhook or its outcome, and a round syncs the queue's
//     log alone. A start writes the outcomes ahead it finds. A crash
//     after the journal's write and before the queue's leaves a webhook
//     in both; it is sent again (at least once), and its entry,
//     rewritten, keeps the first delivery as an attempt (mergeEntry);
//   - a failed attempt is handed over as it ends, and waits for company:
//     a crash may lose those of the last commit.
//
// The attempt that delivered a webhook is kept in its entry (Entry.Final),
// so a webhook delivered at once costs one journal write. A webhook with
// a coalesce key has a note while queued (an entry without outcome or
// index keys), rewritten when a later webhook replaces its content, with
// its arrival kept and one replacement more (coalesce.go).
//
// The journal has its own budget (Options) and does not count
// toward the spool's limits: history never causes a 429.
package journal

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hookpace/hookpace/internal/record"
	"github.com/hookpace/hookpace/spool"
)

const (
	prefixJournal   = 'j'
	prefixAttempt   = 'a'
	prefixHostIndex = 'h' // h <host> 0x00 <id:8> -> nothing: a host's entries, for List
	// o <outcome> 0x00 <id:8> -> nothing: the entries with an outcome, for
	// List by state (outcomes.go)
	prefixOutcomeIndex = 'o'
)

// Options configure the journal. The zero value keeps it on, with
// the defaults noted.
type Options struct {
	Off          bool
	Retain       time.Duration // default 14 days
	MaxBytes     int64         // default a quarter of the spool's MaxBytes
	ResponseBody int           // bytes of a partner's answer kept per attempt; default 1 KiB
	Bodies       bool          // keep a delivered webhook's request, to send it again (bodies.go)

	// For tests: how long records wait for company (default
	// journalLinger).
	linger time.Duration
}

func (o *Options) setDefaults(spoolBytes int64) {
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

// Entry is one webhook in the journal. URLs are kept with their query
// values and any password redacted, request headers with the values of
// secret ones (redact.go) redacted.
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
	Final *spool.Attempt

	// Since version 2 of the entry's record:
	Coalesce   string    // its coalesce key (dedupe.coalesce_header), "" for none
	Replaced   int       // times a later webhook with its key replaced its content
	ReplacedAt time.Time // the last of them
	// Its lane (lane.go): fairness key, priority, ordering key, and the
	// time before which it is not sent.
	Fairness  string
	Priority  spool.Priority
	Ordering  string
	NotBefore time.Time
	// Header is the request's headers as the app sent them (hookpace adds
	// credentials only when it delivers), secret values redacted, at most
	// maxEntryHeaders of them, each value cut to maxEntryHeaderValue bytes.
	Header http.Header
}

// Record versions. An entry's version 1 is: the version byte, Origin and
// OriginSpool (uvarints), Host, Method, URL, Idempotency (strings), Size
// (a uvarint), Accepted (a varint of Unix nanoseconds, 0 for none),
// Outcome, OutcomeAt, Reason, then Final when there is one (the varint
// of its At, and its attempt record). Version 2 puts after Reason, before
// Final: Coalesce, Replaced (a uvarint), ReplacedAt, Fairness, Priority
// (a uvarint), Ordering, NotBefore, and the headers as one string (a
// uvarint count, then each name and value), so that a listing skips
// them whole. An attempt's record is still version 1.
const (
	entryVersion1  = 1
	entryVersion   = 2
	attemptVersion = 1
)

// Bounds of the request headers an entry keeps.
const (
	maxEntryHeaders     = 64
	maxEntryHeaderValue = 1 << 10
)

func (e *Entry) encode() []byte {
	b := make([]byte, 0, 96+len(e.Host)+len(e.URL)+len(e.Reason)+len(e.Idempotency)+len(e.Coalesce)+len(e.Fairness)+len(e.Ordering)+48*len(e.Header))
	b = append(b, entryVersion)
	b = binary.AppendUvarint(b, e.Origin)
	b = binary.AppendUvarint(b, e.OriginSpool)
	b = record.AppendString(b, e.Host)
	b = record.AppendString(b, e.Method)
	b = record.AppendString(b, e.URL)
	b = record.AppendString(b, e.Idempotency)
	b = binary.AppendUvarint(b, uint64(e.Size))
	b = binary.AppendVarint(b, record.UnixNano(e.Accepted))
	b = record.AppendString(b, e.Outcome)
	b = binary.AppendVarint(b, record.UnixNano(e.OutcomeAt))
	b = record.AppendString(b, e.Reason)
	b = record.AppendString(b, e.Coalesce)
	b = binary.AppendUvarint(b, uint64(e.Replaced))
	b = binary.AppendVarint(b, record.UnixNano(e.ReplacedAt))
	b = record.AppendString(b, e.Fairness)
	b = binary.AppendUvarint(b, uint64(e.Priority))
	b = record.AppendString(b, e.Ordering)
	b = binary.AppendVarint(b, record.UnixNano(e.NotBefore))
	b = appendHeader(b, e.Header)
	if e.Final != nil { // absent from an entry without one
		b = binary.AppendVarint(b, e.Final.At.UnixNano())
		b = append(b, encodeAttempt(e.Final)...)
	}
	return b
}

// appendHeader appends h as one length-prefixed string: the count, then
// each name and its values joined, values redacted but for the allow-list (redact.go) and
// long ones cut, at most maxEntryHeaders of them.
func appendHeader(b []byte, h http.Header) []byte {
	if len(h) == 0 {
		return append(b, 0)
	}
	start := len(b)
	b = append(b, 0, 0) // the length, as a 2-byte uvarint when it fits
	n := min(len(h), maxEntryHeaders)
	b = binary.AppendUvarint(b, uint64(n))
	for k, vs := range h {
		if n == 0 {
			break
		}
		n--
		b = record.AppendString(b, k)
		v := spool.Redacted
		if !spool.HiddenHeader(k) {
			v = spool.RedactHeaderValue(k, strings.Join(vs, ", "))
		}
		b = record.AppendString(b, v[:min(len(v), maxEntryHeaderValue)])
	}
	return putLength(b, start)
}

// putLength writes the length of what follows b[start+2:] at b[start:],
// as the uvarint a string's length is: in the two bytes reserved when it
// fits, else moving what follows.
func putLength(b []byte, start int) []byte {
	l := len(b) - start - 2
	if l < 1<<14 {
		b[start], b[start+1] = byte(l)|0x80, byte(l>>7)
		return b
	}
	body := append([]byte(nil), b[start+2:]...)
	return append(binary.AppendUvarint(b[:start], uint64(l)), body...)
}

// decodeEntry reads an entry's record, version 1 or 2.
func decodeEntry(id uint64, v []byte) (*Entry, error) { return readEntry(id, v, true) }

// decodeEntryHead reads an entry's record without its headers and its
// final attempt, which a listing does not show.
func decodeEntryHead(id uint64, v []byte) (*Entry, error) { return readEntry(id, v, false) }

// readEntry reads an entry's record; its headers and final attempt only
// when full.
func readEntry(id uint64, v []byte, full bool) (*Entry, error) {
	d := record.Decoder{B: v}
	ver := d.Byte()
	if ver != entryVersion1 && ver != entryVersion {
		return nil, fmt.Errorf("journal entry %s: unknown version %d", spool.IDString(id), ver)
	}
	e := &Entry{ID: id, Origin: d.Uvarint(), OriginSpool: d.Uvarint(), Host: d.Str(), Method: d.Str(),
		URL: d.Str(), Idempotency: d.Str(), Size: int(d.Uvarint())}
	e.Accepted = record.TimeOf(d.Varint())
	e.Outcome = d.Str()
	e.OutcomeAt = record.TimeOf(d.Varint())
	e.Reason = d.Str()
	var header []byte
	if ver >= 2 {
		e.Coalesce, e.Replaced, e.ReplacedAt = d.Str(), int(d.Uvarint()), record.TimeOf(d.Varint())
		e.Fairness, e.Priority, e.Ordering, e.NotBefore = d.Str(), spool.Priority(d.Uvarint()), d.Str(), record.TimeOf(d.Varint())
		header = (&d).Raw()
	}
	if d.Err != nil {
		return nil, fmt.Errorf("journal entry %s: %w", spool.IDString(id), d.Err)
	}
	if !full {
		return e, nil
	}
	if err := e.decodeTail(header, d.B); err != nil {
		return nil, fmt.Errorf("journal entry %s: %w", spool.IDString(id), err)
	}
	return e, nil
}

// decodeTail reads an entry's headers and its final attempt, if any.
func (e *Entry) decodeTail(header, final []byte) error {
	h := record.Decoder{B: header}
	if n := h.Uvarint(); len(header) > 0 && n > 0 && n <= maxEntryHeaders {
		e.Header = make(http.Header, n)
		for range n {
			k := h.Str()
			e.Header[k] = []string{h.Str()}
		}
	}
	if h.Err != nil && len(header) > 0 { // none in version 1
		return fmt.Errorf("headers: %w", h.Err)
	}
	if len(final) == 0 {
		return nil
	}
	d := record.Decoder{B: final}
	at := d.Varint()
	if d.Err != nil {
		return d.Err
	}
	a, err := decodeAttempt(at, d.B)
	e.Final = a
	return err
}

// journalHeader is h as an entry keeps it (appendHeader), for an entry
// made other than from its record (a dead letter from before the journal).
func journalHeader(h http.Header) http.Header {
	if len(h) == 0 {
		return nil
	}
	d := record.Decoder{B: appendHeader(nil, h)}
	e := &Entry{}
	if e.decodeTail(d.Bytes(), nil) != nil {
		return nil
	}
	return e.Header
}

// entryOf is m's entry, its URL as it is.
func entryOf(m *spool.Message) *Entry {
	e := &Entry{ID: m.ID, Origin: m.Origin, OriginSpool: m.OriginSpool, Host: m.Host, Method: m.Method,
		URL: m.URL, Idempotency: m.Header.Get("Idempotency-Key"), Size: len(m.Body), Accepted: m.Enqueued,
		Fairness: m.Fairness, Priority: m.Priority, Ordering: m.Ordering, NotBefore: m.NotBefore, Header: m.Header}
	if c := m.Coal; c != nil {
		e.Coalesce, e.Replaced, e.ReplacedAt = c.Key, c.Replaced, c.At
	}
	return e
}

// entryFor is m's entry, its URL and headers redacted.
func entryFor(m *spool.Message) *Entry {
	e := entryOf(m)
	e.URL = spool.RedactURL(e.URL)
	e.Header = journalHeader(e.Header)
	return e
}

func encodeAttempt(a *spool.Attempt) []byte {
	b := make([]byte, 0, 32+len(a.Error)+len(a.Body)+64*len(a.Header))
	b = append(b, attemptVersion)
	b = binary.AppendVarint(b, int64(a.Duration))
	b = binary.AppendUvarint(b, uint64(a.Status))
	b = record.AppendString(b, a.Error)
	b = binary.AppendUvarint(b, uint64(a.Batch))
	b = binary.AppendUvarint(b, uint64(len(a.Header)))
	for k, vs := range a.Header {
		b = record.AppendString(b, k)
		b = record.AppendString(b, strings.Join(vs, ", "))
	}
	return record.AppendString(b, string(a.Body))
}

func decodeAttempt(at int64, v []byte) (*spool.Attempt, error) {
	d := record.Decoder{B: v}
	if ver := d.Byte(); ver != attemptVersion {
		return nil, fmt.Errorf("journal attempt: unknown version %d", ver)
	}
	a := &spool.Attempt{At: time.Unix(0, at), Duration: time.Duration(d.Varint()), Status: int(d.Uvarint()),
		Error: d.Str(), Batch: int(d.Uvarint())}
	if n := d.Uvarint(); n > 0 && n < 1024 {
		a.Header = make(http.Header, n)
		for range n {
			k := d.Str()
			a.Header[k] = []string{d.Str()}
		}
	}
	a.Body = d.Bytes()
	if d.Err != nil {
		return nil, fmt.Errorf("journal attempt: %w", d.Err)
	}
	return a, nil
}

func journalKey(id uint64) []byte { return binary.BigEndian.AppendUint64([]byte{prefixJournal}, id) }

// hostIndexPrefix is h <host> 0x00.
func hostIndexPrefix(host string) []byte {
	k := make([]byte, 0, len(host)+10)
	k = append(append(append(k, prefixHostIndex), host...), 0)
	return k
}

func hostIndexKey(host string, id uint64) []byte {
	return binary.BigEndian.AppendUint64(hostIndexPrefix(host), id)
}

func attemptPrefix(id uint64) []byte { return binary.BigEndian.AppendUint64([]byte{prefixAttempt}, id) }

func attemptKey(id uint64, at time.Time) []byte {
	return binary.BigEndian.AppendUint64(attemptPrefix(id), uint64(at.UnixNano()))
}

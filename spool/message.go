package spool

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"net/http"
	"strconv"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/internal/record"
)

// Message is one spooled webhook.
type Message struct {
	ID uint64 // assigned by the spool; increases with every append
	// Origin is the id the app got with its 202 when the message has been
	// queued again since under a new ID (a dead-letter replay); 0 when it
	// is ID. See OriginID.
	Origin uint64
	// OriginSpool is the spool that gave Origin, when it is another
	// hookpace's (a webhook handed off at its shutdown); 0: this one.
	OriginSpool uint64
	// Spool is the identity of the spool that holds the message (see Ref);
	// the spool sets it, it is not stored.
	Spool    uint64
	Host     string // queue key: lower-case host, with the port when it is not the default
	Method   string
	URL      string
	Header   http.Header
	Body     []byte
	Enqueued time.Time

	// Where the webhook waits within its host (lane.go): its fairness
	// key, priority, ordering key, and the time before which it is not
	// sent (zero: at once). All zero for a webhook without them.
	Fairness  string
	Priority  Priority
	Ordering  string
	NotBefore time.Time

	// Coal is the coalesce key the webhook was accepted with and its
	// replacements (nil: none), kept in its record so that its journal
	// entry, written when it leaves the queue, says them.
	Coal *Coalescing

	// Delivery state, persisted when an attempt fails so that restarts keep
	// counting towards max_attempts.
	Attempts   int
	LastStatus int
	LastError  string
	LastTry    time.Time

	size int64 // of the stored record, for usage accounting
	// Final is the attempt that delivered it, set by whoever records
	// attempts (the journal) and read at its outcome (History.Leaving).
	Final *Attempt

	// rec is the record that ReadBody read Body into the tail of: Append
	// writes the rest of the record in front of it instead of copying the
	// body again.
	rec []byte
}

// Coalescing is what a webhook's record keeps of its coalesce key: the key,
// how often a later webhook with it replaced the content, and when last
// (zero: never).
type Coalescing struct {
	Key      string
	Replaced int
	At       time.Time
}

// IDString formats an id the way hookpace shows it to users.
func IDString(id uint64) string {
	const hex = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = hex[id&0xf]
		id >>= 4
	}
	return string(b[:])
}

// ParseID is the inverse of IDString.
func ParseID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("bad message id %q", s)
	}
	return id, nil
}

// OriginID is the message's identity for users and receivers: the id the
// app got with its 202. It is ID, unless a replay from the dead letters
// queued the message again (under a new ID, at the tail of its host's
// queue).
func (m *Message) OriginID() uint64 {
	if m.Origin != 0 {
		return m.Origin
	}
	return m.ID
}

// Record versions: version 2 is version 1 with the Origin id (a uvarint)
// after the version byte, written only for a message that has one, so
// that every other record stays as earlier versions of hookpace wrote it.
// Version 3 is version 2 with the origin's spool (8 bytes) after the
// Origin id, written only for a webhook handed off by another hookpace.
// Version 4 adds a webhook's lane fields (lane.go), written only for a
// webhook that has one of them: after the version byte, the Origin id (a
// uvarint), the origin's spool (8 bytes, 0 for none), the fairness key,
// the priority (1 byte), the ordering key, and NotBefore (a varint of
// Unix nanoseconds, 0 for none); the rest is version 1's. Version 5 is
// version 4 with the coalesce key, the replacements (a uvarint) and the
// last replacement's time (a varint of Unix nanoseconds, 0 for none)
// after NotBefore, written only for a webhook with a coalesce key.
const (
	encodingVersion         = 1
	encodingVersionOrigin   = 2
	encodingVersionHanded   = 3
	encodingVersionLanes    = 4
	encodingVersionCoalesce = 5
)

// laned says that m has a lane field set, and takes a version 4 record.
func (m *Message) laned() bool {
	return m.Fairness != "" || m.Priority != PriorityNormal || m.Ordering != "" || !m.NotBefore.IsZero()
}

// encode appends a compact binary form of m to b. The format is a version
// byte followed by varints and length-prefixed strings, the body last; it is
// private to the spool and versioned so that it can change.
func (m *Message) encode(b []byte) []byte {
	b = m.encodeHead(b)
	b = binary.AppendUvarint(b, uint64(len(m.Body)))
	return append(b, m.Body...)
}

// encodeHead appends everything encode writes before the body's length.
func (m *Message) encodeHead(b []byte) []byte {
	if m.Coal != nil || m.laned() {
		v := byte(encodingVersionLanes)
		if m.Coal != nil {
			v = encodingVersionCoalesce
		}
		b = append(b, v)
		b = binary.AppendUvarint(b, m.Origin)
		b = binary.BigEndian.AppendUint64(b, m.OriginSpool)
		b = record.AppendString(b, m.Fairness)
		b = append(b, byte(m.Priority))
		b = record.AppendString(b, m.Ordering)
		b = binary.AppendVarint(b, record.UnixNano(m.NotBefore))
		if c := m.Coal; c != nil {
			b = record.AppendString(b, c.Key)
			b = binary.AppendUvarint(b, uint64(c.Replaced))
			b = binary.AppendVarint(b, record.UnixNano(c.At))
		}
	} else if m.OriginSpool != 0 {
		b = append(b, encodingVersionHanded)
		b = binary.AppendUvarint(b, m.Origin)
		b = binary.BigEndian.AppendUint64(b, m.OriginSpool)
	} else if m.Origin != 0 {
		b = append(b, encodingVersionOrigin)
		b = binary.AppendUvarint(b, m.Origin)
	} else {
		b = append(b, encodingVersion)
	}
	b = record.AppendString(b, m.Method)
	b = record.AppendString(b, m.URL)
	b = binary.AppendVarint(b, m.Enqueued.UnixNano())
	b = binary.AppendUvarint(b, uint64(m.Attempts))
	b = binary.AppendUvarint(b, uint64(m.LastStatus))
	b = record.AppendString(b, m.LastError)
	b = binary.AppendVarint(b, record.UnixNano(m.LastTry))
	b = binary.AppendUvarint(b, uint64(len(m.Header)))
	for k, vs := range m.Header {
		b = record.AppendString(b, k)
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = record.AppendString(b, v)
		}
	}
	return b
}

// headLen is the length of encodeHead's output, computed without writing it.
func (m *Message) headLen() int {
	n := 1 + strLen(m.Method) + strLen(m.URL) + varintLen(m.Enqueued.UnixNano()) +
		uvarintLen(uint64(m.Attempts)) + uvarintLen(uint64(m.LastStatus)) + strLen(m.LastError) +
		varintLen(record.UnixNano(m.LastTry)) + uvarintLen(uint64(len(m.Header)))
	switch {
	case m.Coal != nil || m.laned():
		n += uvarintLen(m.Origin) + 8 + strLen(m.Fairness) + 1 + strLen(m.Ordering) + varintLen(record.UnixNano(m.NotBefore))
		if c := m.Coal; c != nil {
			n += strLen(c.Key) + uvarintLen(uint64(c.Replaced)) + varintLen(record.UnixNano(c.At))
		}
	case m.OriginSpool != 0:
		n += uvarintLen(m.Origin) + 8
	case m.Origin != 0:
		n += uvarintLen(m.Origin)
	}
	for k, vs := range m.Header {
		n += strLen(k) + uvarintLen(uint64(len(vs)))
		for _, v := range vs {
			n += strLen(v)
		}
	}
	return n
}

// RecordSize is the size of m's record with a body of bodyLen bytes and
// m's other fields as they are: what MaxRecordSize bounds.
func (m *Message) RecordSize(bodyLen int) int {
	return m.headLen() + uvarintLen(uint64(bodyLen)) + bodyLen
}

// encodedLen is the length of encode's output.
func (m *Message) encodedLen() int {
	return m.headLen() + uvarintLen(uint64(len(m.Body))) + len(m.Body)
}

// record is m's encoding in a buffer of its own, for one write.
func (m *Message) record() []byte {
	rec := m.rec
	m.rec = nil // the record is written once; later writes encode afresh
	if n := len(m.Body); rec != nil && n > 0 && len(rec) == m.encodedLen() && &rec[len(rec)-n] == &m.Body[0] {
		// The body is already in place: write the rest in front of it.
		m.encodeHead(rec[:0])
		binary.AppendUvarint(rec[:len(rec)-n-uvarintLen(uint64(n))], uint64(n))
		return rec
	}
	return m.encode(make([]byte, 0, m.encodedLen()))
}

// ReadBody sets m's body to the next n bytes of r, read straight into the
// buffer that m's record will be written from, so that spooling the body
// copies it once. Set m's other fields first: if they change afterwards,
// Append copies the body again, as it does for any other message.
func (m *Message) ReadBody(r io.Reader, n int) error {
	head := m.headLen() + uvarintLen(uint64(n))
	rec := make([]byte, head+n)
	if _, err := io.ReadFull(r, rec[head:]); err != nil {
		return err
	}
	m.Body, m.rec = rec[head:], rec
	return nil
}

var errCorrupt = record.ErrCorrupt

func decodeMessage(host string, id uint64, b []byte) (*Message, error) {
	return readMessage(host, id, b, false)
}

// decodeMessageHead is decodeMessage without the body: it reads no byte
// of it (a record's body may be most of what is mapped).
func decodeMessageHead(host string, id uint64, b []byte) (*Message, error) {
	return readMessage(host, id, b, true)
}

func readMessage(host string, id uint64, b []byte, head bool) (*Message, error) {
	d := record.Decoder{B: b}
	m := &Message{ID: id, Host: host}
	if !readVersion(&d, m) {
		if len(b) == 0 {
			return nil, fmt.Errorf("message %s: %w", IDString(id), errCorrupt)
		}
		return nil, fmt.Errorf("message %s: unknown encoding version %d", IDString(id), b[0])
	}
	m.Method = d.Str()
	m.URL = d.Str()
	m.Enqueued = time.Unix(0, d.Varint())
	m.Attempts = int(d.Uvarint())
	m.LastStatus = int(d.Uvarint())
	m.LastError = d.Str()
	if t := d.Varint(); t != 0 {
		m.LastTry = time.Unix(0, t)
	}
	n := d.Uvarint()
	if n > uint64(len(b)) {
		return nil, errCorrupt
	}
	m.Header = make(http.Header, n)
	for i := uint64(0); i < n && d.Err == nil; i++ {
		k := d.Str()
		nv := d.Uvarint()
		if nv > uint64(len(b)) {
			return nil, errCorrupt
		}
		vs := make([]string, 0, nv)
		for j := uint64(0); j < nv && d.Err == nil; j++ {
			vs = append(vs, d.Str())
		}
		m.Header[k] = vs
	}
	if head {
		return m, nil
	}
	m.Body = d.Bytes()
	if d.Err != nil {
		return nil, fmt.Errorf("message %s: %w", IDString(id), d.Err)
	}
	return m, nil
}

func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// varintLen is the length of binary.AppendVarint's output: a zig-zag uvarint.
func varintLen(x int64) int { return uvarintLen(uint64(x<<1) ^ uint64(x>>63)) }

func strLen(s string) int { return uvarintLen(uint64(len(s))) + len(s) }

// readVersion reads a message record's version byte and what the version
// puts after it (the origin, the lane fields, the coalesce key) into m. It reports false for
// a version it does not know (or no byte at all).
func readVersion(d *record.Decoder, m *Message) bool {
	switch v := d.Byte(); v {
	case encodingVersion:
		return d.Err == nil
	case encodingVersionOrigin:
		m.Origin = d.Uvarint()
		return d.Err == nil
	case encodingVersionHanded:
		m.Origin = d.Uvarint()
		m.OriginSpool = d.Uint64()
		return d.Err == nil
	case encodingVersionLanes, encodingVersionCoalesce:
		m.Origin = d.Uvarint()
		m.OriginSpool = d.Uint64()
		m.Fairness = d.Str()
		if p := Priority(d.Byte()); p <= PriorityLow {
			m.Priority = p
		} else if d.Err == nil {
			d.Err = errCorrupt
		}
		m.Ordering = d.Str()
		if t := d.Varint(); t != 0 {
			m.NotBefore = time.Unix(0, t)
		}
		if v == encodingVersionCoalesce {
			m.Coal = &Coalescing{Key: d.Str(), Replaced: int(d.Uvarint()), At: record.TimeOf(d.Varint())}
		}
		return d.Err == nil
	}
	if d.Err == nil {
		d.Err = errCorrupt
	}
	return false
}

// Keys.

const (
	prefixQueue  = 'q'
	prefixDead   = 'd'
	prefixPaused = 'p' // in the kept database: hosts paused by an operator
)

var keySeq = []byte("mseq")

func queuePrefix(host string) []byte { return hostPrefix(prefixQueue, host) }

// hostPrefix is the start of every key of host's under the key prefix p:
// p, the host, a 0 byte; an id or a suffix follows.
func hostPrefix(p byte, host string) []byte {
	k := make([]byte, 0, len(host)+10)
	k = append(k, p)
	k = append(k, host...)
	return append(k, 0)
}

func queueKey(host string, id uint64) []byte {
	return binary.BigEndian.AppendUint64(queuePrefix(host), id)
}

// parseQueueKey splits a queue key into its host and id.
func parseQueueKey(k []byte) (host string, id uint64, ok bool) {
	if len(k) < 1+1+8 || k[0] != prefixQueue || k[len(k)-9] != 0 {
		return "", 0, false
	}
	return string(k[1 : len(k)-9]), binary.BigEndian.Uint64(k[len(k)-8:]), true
}

func deadKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixDead}, id)
}

func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), v) }

// eachID calls fn with the id and item of each key of txn that is prefix
// and an id (8 bytes, big-endian), in id order, until fn says no more or
// fails. prefetch reads values ahead, for a loop that reads each.
func eachID(txn *badger.Txn, prefix byte, prefetch bool, fn func(id uint64, item *badger.Item) (more bool, err error)) error {
	o := badger.IteratorOptions{Prefix: []byte{prefix}}
	if prefetch {
		o.PrefetchValues, o.PrefetchSize = true, 64
	}
	it := txn.NewIterator(o)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		if k := item.Key(); len(k) == 9 {
			if more, err := fn(record.BeUint64(k[1:]), item); err != nil || !more {
				return err
			}
		}
	}
	return nil
}

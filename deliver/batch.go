package deliver

// Batching: for a host with a batch policy, webhooks to the
// same URL with JSON bodies go together, many to one request, as a JSON
// array of their bodies or as an envelope that carries each one's id,
// arrival and chosen headers. The spool keeps one record per webhook; a
// batch exists only from the moment it is gathered until its attempt's
// outcome is applied to every member.
//
// A batch takes one token and one slot, like one webhook. The host's
// window gathers it when a slot could go (window.Batch: the head and the
// webhooks behind it with the same method and URL, up to max_events and
// max_bytes, waiting for company up to max_wait); this file owns the wire
// format: which webhooks may join and how many bytes each adds.
//
// A 2xx deletes every member; a 429 puts the members back at the head of
// the queue, to be gathered again after the hold; a failure retries the
// same members together after the backoff; a permanent failure buries
// each member as its own dead letter, which can be replayed alone.

import (
	"encoding/json"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hookpace/hookpace/pacer"
	"github.com/hookpace/hookpace/spool"
	"github.com/hookpace/hookpace/window"
)

// Batch is a host's batching policy.
type Batch struct {
	MaxEvents int           // members of one batch, >= 2
	MaxBytes  int           // of a batch's whole body
	MaxWait   time.Duration // how long a lone webhook waits for company
	// Envelope sends {"events": [...]} with each member's id, arrival,
	// the Headers listed and body; otherwise a JSON array of the bodies.
	Envelope bool
	Headers  []string // canonical names
}

// events is how many webhooks one request may carry: 1 without batching.
func (b *Batch) events() int {
	if b == nil {
		return 1
	}
	return b.MaxEvents
}

// batchCount is what a batching host has delivered since the start.
type batchCount struct {
	requests, webhooks int64
}

// window is how h's window gathers batches of b: b's limits, and what
// each webhook adds to a batch's body in b's wire format (nil: no
// batching).
func (b *Batch) window() *window.Batch {
	if b == nil {
		return nil
	}
	return &window.Batch{MaxEvents: b.MaxEvents, MaxBytes: b.MaxBytes, MaxWait: b.MaxWait, Frame: frame(b),
		Size: b.size}
}

// size is how many bytes m adds to a batch's body (a separating comma
// not counted), or -1 if m may not join a batch.
func (b *Batch) size(m *spool.Message) int {
	if !batchable(m) {
		return -1
	}
	n := len(m.Body)
	if b.Envelope {
		n += len(appendEventHead(nil, m, b.Headers)) + 1
	}
	return n
}

// batchable reports whether m may join a batch: its body is JSON, by its
// Content-Type and in fact.
func batchable(m *spool.Message) bool {
	mt, _, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return false
	}
	return json.Valid(m.Body)
}

// frame is the bytes a batch's body has around its members.
func frame(b *Batch) int {
	if b.Envelope {
		return len(`{"events":[]}`)
	}
	return len(`[]`)
}

// encodeBatch returns the body of a batch of ms.
func encodeBatch(b *Batch, ms []*spool.Message) []byte {
	n := frame(b)
	for _, m := range ms {
		n += len(m.Body) + 1
		if b.Envelope {
			n += 128
		}
	}
	buf := make([]byte, 0, n)
	if b.Envelope {
		buf = append(buf, `{"events":[`...)
	} else {
		buf = append(buf, '[')
	}
	for i, m := range ms {
		if i > 0 {
			buf = append(buf, ',')
		}
		if b.Envelope {
			buf = appendEventHead(buf, m, b.Headers)
			buf = append(buf, m.Body...)
			buf = append(buf, '}')
		} else {
			buf = append(buf, m.Body...)
		}
	}
	if b.Envelope {
		return append(buf, "]}"...)
	}
	return append(buf, ']')
}

// appendEventHead appends an envelope event up to its body:
// {"id":"…","received_at":"…","headers":{…},"body":
func appendEventHead(buf []byte, m *spool.Message, headers []string) []byte {
	buf = append(buf, `{"id":"`...)
	buf = append(buf, m.Ref().String()...)
	buf = append(buf, `","received_at":"`...)
	buf = m.Enqueued.UTC().AppendFormat(buf, time.RFC3339Nano)
	buf = append(buf, `","headers":{`...)
	first := true
	for _, k := range headers {
		vs := m.Header[k]
		if len(vs) == 0 {
			continue
		}
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = appendJSONString(buf, k)
		buf = append(buf, ':')
		buf = appendJSONString(buf, strings.Join(vs, ", "))
	}
	return append(buf, `},"body":`...)
}

func appendJSONString(buf []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always encodes
	return append(buf, b...)
}

// perMessage lists the headers that belong to one webhook and not to a
// batch of them: the batch has its own body, length and trace.
var perMessage = map[string]bool{
	"Content-Type": true, "Content-Length": true, "Content-Encoding": true,
	"Traceparent": true, "Tracestate": true, "Baggage": true,
}

// batchHeader is a batch request's header: the headers every member has
// with the same values, but for those of perMessage, and a JSON
// Content-Type.
func batchHeader(ms []*spool.Message) http.Header {
	hdr := http.Header{}
	for k, v := range ms[0].Header {
		if perMessage[k] {
			continue
		}
		same := true
		for _, m := range ms[1:] {
			if !slices.Equal(m.Header[k], v) {
				same = false
				break
			}
		}
		if same {
			hdr[k] = slices.Clone(v)
		}
	}
	hdr.Set("Content-Type", "application/json")
	return hdr
}

// batchID is a batch's id for the receiver (the id header, the signature):
// its first and last members' ids. A batch retried whole keeps it.
func batchID(ms []*spool.Message) string {
	return ms[0].Ref().String() + "-" + ms[len(ms)-1].Ref().String()
}

// keepBatchable returns the members of ms that may still be batched. A
// member whose content was replaced by one that is not JSON (coalescing)
// goes back to the head of h's queue, to go alone; if none is left, the
// slot is given back unused.
func (d *Dispatcher) keepBatchable(h *host, ms []*spool.Message, sentAt time.Time, lease string) []*spool.Message {
	keep := make([]*spool.Message, 0, len(ms))
	var alone []*spool.Message
	for _, m := range ms {
		if batchable(m) {
			keep = append(keep, m)
		} else {
			alone = append(alone, m)
		}
	}
	if len(alone) == 0 {
		return ms
	}
	d.mu.Lock()
	h.win.Alone(alone)
	h.extra -= len(alone)
	if len(keep) == 0 {
		h.extra++ // the slot's own message was among them
		pr := pacer.Result{Outcome: pacer.NoSend, SentAt: sentAt}
		h.release(time.Now(), lease, pr)
		d.slotDone(h)
	}
	d.mu.Unlock()
	for _, m := range alone {
		d.end(m)
	}
	return keep
}

package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strconv"

	"github.com/hookpace/hookpace/egress"
	"github.com/hookpace/hookpace/spool"
)

// Outcome is what became of one request to the proxy: the decision key of
// the ingest log line, and the label telemetry gives
// hookpace_ingest_requests_total (its String). The proxy counts these
// values, never strings, so that a new outcome can't be counted under
// another's name.
type Outcome uint8

// Ingest outcomes.
const (
	OutcomeAccepted Outcome = iota
	OutcomeRejectedBackpressure
	OutcomeTooLarge
	OutcomeRefused
	OutcomePassthrough
	OutcomeBadRequest
	OutcomeUnauthorized
	OutcomeError
	OutcomeRejectedStopping // hookpace is shutting down
	OutcomeDuplicate        // answered with an earlier webhook's id (Idempotency-Key)
	OutcomeCoalesced        // replaced a queued webhook (Hookpace-Coalesce-Key)
	OutcomeRejectedKeyFull  // 429: its fairness key is at max_queued_per_key
	OutcomeStaged           // a hand-off's webhook held until its ordering key's batch ends (handoff_batch.go)
	NumOutcomes             // how many there are, for arrays indexed by them
)

var outcomeNames = [NumOutcomes]string{
	OutcomeAccepted:             "accepted",
	OutcomeRejectedBackpressure: "rejected_backpressure",
	OutcomeTooLarge:             "too_large",
	OutcomeRefused:              "refused",
	OutcomePassthrough:          "passthrough",
	OutcomeBadRequest:           "bad_request",
	OutcomeUnauthorized:         "unauthorized",
	OutcomeError:                "error",
	OutcomeRejectedStopping:     "rejected_stopping",
	OutcomeDuplicate:            "duplicate",
	OutcomeCoalesced:            "coalesced",
	OutcomeRejectedKeyFull:      "rejected_key_full",
	OutcomeStaged:               "handoff_staged",
}

func (o Outcome) String() string {
	if o >= NumOutcomes {
		return "Outcome(" + strconv.Itoa(int(o)) + ")"
	}
	return outcomeNames[o]
}

// What became of a CONNECT: the mode label of hookpace_tunnels_total.
const (
	TunnelIntercepted = "intercepted" // decrypted with the CA: spooled and paced
	TunnelPassthrough = "passthrough" // bytes passed through: NOT spooled, NOT paced
	TunnelRefused     = "refused"     // connect: deny
	// TunnelRejected: the client refused hookpace's certificate (a TLS
	// alert in the intercepting handshake): its webhook failed, loudly.
	TunnelRejected = "rejected"
)

// Ingest outcomes, as counted in hookpace_ingest_requests_total.
const (
	outcomeAccepted     = OutcomeAccepted
	outcomeBackpressure = OutcomeRejectedBackpressure
	outcomeTooLarge     = OutcomeTooLarge
	outcomeRefused      = OutcomeRefused
	outcomePassthrough  = OutcomePassthrough
	outcomeBadRequest   = OutcomeBadRequest
	outcomeUnauthorized = OutcomeUnauthorized
	outcomeError        = OutcomeError
	outcomeStopping     = OutcomeRejectedStopping
)

// decision is one ingest decision: the answer and the canonical log line.
type decision struct {
	outcome Outcome
	status  int
	reason  string
	header  http.Header
	id      string
	// label, when set, is the log line's decision in place of the
	// outcome's name ("tunnel": a CONNECT spliced through, counted as a
	// passthrough).
	label string
	route string // the inbound route it came through; "" for the proxy's own
	// rule is the webhooks rule that made the request a webhook, for the
	// ingest line.
	rule string
}

// badRequest is a 400 with its reason.
func badRequest(reason string) decision {
	return decision{outcome: outcomeBadRequest, status: http.StatusBadRequest, reason: reason}
}

// unauthorized is the 407 asking for proxy Basic auth.
func unauthorized() decision {
	return decision{outcome: outcomeUnauthorized, status: http.StatusProxyAuthRequired,
		reason: "proxy authentication required", header: http.Header{"Proxy-Authenticate": {`Basic realm="hookpace"`}}}
}

// refused maps an egress refusal to its answer, 403 with the guard's
// reason, on every path (ingest, passthrough and CONNECT). ok is false
// when err is not a refusal.
func refused(err error) (d decision, ok bool) {
	if err == nil {
		return decision{}, false
	}
	var denied *egress.DeniedError
	if !errors.As(err, &denied) {
		return decision{}, false
	}
	return decision{outcome: outcomeRefused, status: http.StatusForbidden, reason: denied.Error() + allowHint(denied)}, true
}

// allowHint says how to allow an address that is refused for its kind
// (loopback, private and the like): the operator's own choice, made in
// egress.allow. Addresses refused by egress.deny, hookpace's own listeners
// and cloud metadata get no hint: allowing those is not a fix.
func allowHint(d *egress.DeniedError) string {
	switch d.Reason {
	case egress.ReasonDenied, egress.ReasonSelf, egress.ReasonCloudMetadata:
		return ""
	}
	prefix := netip.PrefixFrom(d.Addr, d.Addr.BitLen())
	if d.Reason == egress.ReasonLoopback && d.Addr.Is4() {
		prefix = netip.MustParsePrefix("127.0.0.0/8")
	}
	return fmt.Sprintf(`; to allow it, add it to egress.allow (egress: {allow: ["%s"]})`, prefix)
}

func tooLarge(n, limit int64) decision {
	reason := fmt.Sprintf("body exceeds spool.max_body (%d bytes)", limit)
	if n > 0 {
		reason = fmt.Sprintf("body of %d bytes exceeds spool.max_body (%d bytes)", n, limit)
	}
	return decision{outcome: outcomeTooLarge, status: http.StatusRequestEntityTooLarge, reason: reason}
}

// tooLargeForSpool answers a webhook whose record (body, headers and URL)
// is larger than the spool can store, whatever spool.max_body says.
func tooLargeForSpool() decision {
	return decision{outcome: outcomeTooLarge, status: http.StatusRequestEntityTooLarge,
		reason: fmt.Sprintf("webhook (body, headers and URL) exceeds what the spool can store (%d bytes)", spool.MaxRecordSize)}
}

// answer sets the decision's headers in h and returns its body: the 202's
// JSON with X-Hookpace-Id, or "hookpace: reason" as text. Both the direct
// path (serveIngest) and goproxy's (response) answer with it.
func (d decision) answer(h http.Header, host string) []byte {
	for k, vs := range d.header {
		h[k] = vs
	}
	if d.status == http.StatusAccepted {
		h["Content-Type"] = jsonType
		h["X-Hookpace-Id"] = []string{d.id}
		return acceptedBody(d.id, host)
	}
	h["Content-Type"] = textType
	return []byte("hookpace: " + d.reason + "\n")
}

// The answers' Content-Type values, shared by every answer: a header's
// value slice is replaced (Set) or copied (net/http, goproxy) by whoever
// changes or sends it, never written into, and an append to one of
// length and capacity 1 copies it.
var (
	jsonType = []string{"application/json"}
	textType = []string{"text/plain; charset=utf-8"}
)

// response is the decision as goproxy's answer.
func (d decision) response(r *http.Request, host string) *http.Response {
	resp := &http.Response{Request: r, TransferEncoding: r.TransferEncoding, Header: make(http.Header),
		StatusCode: d.status, Status: strconv.Itoa(d.status) + " " + http.StatusText(d.status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
	body := d.answer(resp.Header, host)
	resp.ContentLength = int64(len(body))
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp
}

// acceptedBody is the 202's JSON: {"id":"…","status":"accepted","host":"…"}.
func acceptedBody(id, host string) []byte {
	b := make([]byte, 0, 64+len(id)+len(host))
	b = append(b, `{"id":"`...)
	b = append(b, id...)
	b = append(b, `","status":"accepted","host":`...)
	b = strconv.AppendQuote(b, host)
	return append(b, "}\n"...)
}

package proxy

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// Idempotent enqueue: a POST whose idempotency header repeats
// one accepted for the same host within its dedupe window is answered 202
// with the first webhook's id and X-Hookpace-Duplicate: true, and nothing
// is stored. The spool decides, atomically with its group commit (see
// spool.AppendOnce); the header is stored and forwarded unchanged.

const (
	outcomeDuplicate = OutcomeDuplicate
	outcomeCoalesced = OutcomeCoalesced
	// HeaderDuplicate marks the 202 of a repeated POST, HeaderCoalesced
	// that of an update that replaced a queued webhook.
	HeaderDuplicate = "X-Hookpace-Duplicate"
	HeaderCoalesced = "X-Hookpace-Coalesced"
)

// idempotencyKey returns the request's idempotency key for a host whose
// dedupe window is window: "" when dedupe is off or the request has none,
// or a 400 for a key the spool cannot remember.
func idempotencyKey(h http.Header, pol *Policy, window time.Duration) (string, *decision) {
	if pol.IdempotencyHeader == "" || window <= 0 {
		return "", nil
	}
	vs := h.Values(pol.IdempotencyHeader)
	switch {
	case len(vs) == 0:
		return "", nil
	case len(vs) > 1:
		d := badRequest(pol.IdempotencyHeader + " given more than once")
		return "", &d
	case vs[0] == "":
		d := badRequest(pol.IdempotencyHeader + " is empty")
		return "", &d
	case len(vs[0]) > spool.MaxIdempotencyKey:
		d := badRequest(pol.IdempotencyHeader + " longer than " + strconv.Itoa(spool.MaxIdempotencyKey) + " bytes")
		return "", &d
	}
	return vs[0], nil
}

// coalesceKey takes the coalesce key out of the stored headers: it is
// hookpace's, never the partner's. A key longer than the spool keeps is
// a 400.
func coalesceKey(stored http.Header, pol *Policy) (string, *decision) {
	if pol.CoalesceHeader == "" {
		return "", nil
	}
	name := http.CanonicalHeaderKey(pol.CoalesceHeader)
	vs := stored[name]
	delete(stored, name)
	switch {
	case len(vs) == 0:
		return "", nil
	case len(vs) > 1 || vs[0] == "" || len(vs[0]) > spool.MaxIdempotencyKey:
		d := badRequest(pol.CoalesceHeader + " must be given once, 1 to " + strconv.Itoa(spool.MaxIdempotencyKey) + " bytes")
		return "", &d
	}
	if err := spool.CheckKeyText(vs[0]); err != nil {
		d := badRequest(pol.CoalesceHeader + " " + err.Error() + ": want printable UTF-8")
		return "", &d
	}
	return vs[0], nil
}

// appendKeys stores m, or finds that its idempotency key already stored a
// webhook for its host, or replaces the queued webhook its coalesce key
// names: the answer says which.
func (p *Proxy) appendKeys(ctx context.Context, m *spool.Message, hp HostPolicy, k spool.Keys) (decision, error) {
	if k.Idempotency == "" && k.Coalesce == "" {
		err := p.opts.Spool.Append(ctx, m, hp.MaxQueued)
		return decision{outcome: outcomeAccepted, status: http.StatusAccepted, id: m.Ref().String()}, err
	}
	k.Window = hp.DedupeWindow
	how, err := p.opts.Spool.AppendKeys(ctx, m, hp.MaxQueued, k)
	if err != nil {
		return decision{}, err
	}
	d := decision{outcome: outcomeAccepted, status: http.StatusAccepted, id: m.Ref().String()}
	switch how {
	case spool.Duplicate:
		d.outcome, d.header = outcomeDuplicate, http.Header{HeaderDuplicate: {"true"}}
		p.opts.Metrics.Deduplicated(ctx, m.Host)
	case spool.Conflict:
		// The IETF Idempotency-Key draft's answer to a key reused for
		// another request: nothing is stored.
		return decision{outcome: outcomeBadRequest, label: "idempotency_conflict", status: http.StatusUnprocessableEntity,
			reason: "this idempotency key was used for another request (method, URL or body) to " + m.Host +
				" within its dedupe window: that webhook is " + m.Ref().String() + "; a new webhook needs a new key"}, nil
	case spool.Coalesced:
		d.outcome, d.header = outcomeCoalesced, http.Header{HeaderCoalesced: {"true"}}
		p.opts.Metrics.Coalesced(ctx, m.Host)
	}
	return d, nil
}

package proxy

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/hookpace/hookpace/spool"
	"github.com/hookpace/hookpace/telemetry"
)

// Idempotent enqueue (issue 20): a POST whose idempotency header repeats
// one accepted for the same host within its dedupe window is answered 202
// with the first webhook's id and X-Hookpace-Duplicate: true, and nothing
// is stored. The spool decides, atomically with its group commit (see
// spool.AppendOnce); the header is stored and forwarded unchanged.

// OnceSpooler is a Spooler that remembers idempotency keys;
// *spool.Spool is the real one. A Spooler without it stores every POST.
type OnceSpooler interface {
	AppendOnce(ctx context.Context, m *spool.Message, hostLimit int64, key string, window time.Duration) (dup bool, err error)
}

// DedupeCounter counts deduplicated webhooks by host; *telemetry.Metrics
// is the real one.
type DedupeCounter interface {
	Deduplicated(ctx context.Context, host string)
}

const (
	outcomeDuplicate = telemetry.IngestDuplicate
	// HeaderDuplicate marks the 202 of a repeated POST.
	HeaderDuplicate = "X-Hookpace-Duplicate"
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

// appendOnce stores m, or finds that key already stored a webhook for its
// host: dup is then true and m.ID is that webhook's id.
func (p *Proxy) appendOnce(ctx context.Context, m *spool.Message, hp HostPolicy, key string) (dup bool, err error) {
	sp, ok := p.opts.Spool.(OnceSpooler)
	if key == "" || !ok {
		return false, p.opts.Spool.Append(ctx, m, hp.MaxQueued)
	}
	dup, err = sp.AppendOnce(ctx, m, hp.MaxQueued, key, hp.DedupeWindow)
	if dup && err == nil {
		if c, ok := p.opts.Metrics.(DedupeCounter); ok {
			c.Deduplicated(ctx, m.Host)
		}
	}
	return dup, err
}

// duplicate is the answer to a repeated POST.
func duplicate(id uint64) decision {
	return decision{outcome: outcomeDuplicate, status: http.StatusAccepted, id: spool.IDString(id),
		header: http.Header{HeaderDuplicate: {"true"}}}
}

package proxy

import (
	"net/http"
	"strconv"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// Inbound is how a webhook that came through an inbound route (a
// provider's POST to the app's own endpoint, package inbound) is taken in:
// the route has verified it and rewritten its URL to the app's; from here
// it is spooled, deduplicated and answered exactly as a proxied POST is.
type Inbound struct {
	Route string // the route's name, for the ingest line
	// Key is the provider's delivery id, the webhook's idempotency key
	// for the app's host; "" = none.
	Key string
	// Status and Body answer a webhook once it is durable (and a repeat
	// of one); Status 0: 202 with hookpace's JSON.
	Status int
	Body   []byte
}

// ServeInbound takes in r, whose URL is the app's absolute URL and whose
// body is the provider's, and answers it: once durable with in's answer,
// else as the proxy answers (429 or 503 with Retry-After, 413, ...).
func (p *Proxy) ServeInbound(w http.ResponseWriter, r *http.Request, in Inbound) {
	start := time.Now()
	pol := p.policy.Load()
	host := HostKey(r.URL)
	d, size := p.decide(r.Context(), r, pol, host, "", &in)
	d.route = in.Route
	p.record(r, start, host, size, d)
	if d.status == http.StatusAccepted && in.Status != 0 {
		for k, vs := range d.header {
			w.Header()[k] = vs
		}
		w.Header().Set("X-Hookpace-Id", d.id)
		if len(in.Body) > 0 {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(in.Body)))
		w.WriteHeader(in.Status)
		w.Write(in.Body)
		return
	}
	body := d.answer(w.Header(), host)
	w.WriteHeader(d.status)
	w.Write(body)
}

// inboundKey checks a provider's delivery id as an idempotency key for a
// host whose dedupe window is window: "" when there is none or dedupe is
// off for the host.
func inboundKey(key string, window time.Duration) (string, *decision) {
	if key == "" || window <= 0 {
		return "", nil
	}
	if len(key) > spool.MaxIdempotencyKey {
		d := badRequest("delivery id longer than " + strconv.Itoa(spool.MaxIdempotencyKey) + " bytes")
		return "", &d
	}
	return key, nil
}

package deliver

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookpace/hookpace/pacer"
	"github.com/hookpace/hookpace/ratelimit"
	"github.com/hookpace/hookpace/spool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// result is what one attempt learned.
type result struct {
	status     int
	err        error
	retryAfter string
	took       time.Duration

	// What the answer means, from classify.
	verdict verdict
	outcome pacer.Outcome
	reason  string

	partner    *ratelimit.Info // what the answer said of the partner's limits (partner.go)
	quotaUntil time.Time       // the answer held the host until then (quota used up)
}

// attempt sends m once and applies the verdict. It runs on its own
// goroutine, holding one of the host's slots.
func (d *Dispatcher) attempt(h *host, m *spool.Message, pol Policy, sentAt time.Time, lease string) {
	defer d.wg.Done()
	d.begin(m) // see coalesce.go
	stopRenew := d.renew(h.name, lease)
	ctx := d.opts.Prop.Extract(d.ctx, propagation.HeaderCarrier(m.Header))
	ctx, span := d.opts.Tracer.Start(ctx, "hookpace.deliver", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("hookpace.host", m.Host),
			attribute.String("hookpace.message_id", spool.IDString(m.OriginID())),
			attribute.Int("hookpace.attempt", m.Attempts+1),
		))
	n := m.Attempts + 1 // m is ours until finish puts it back
	res := d.send(ctx, m, pol)
	stopRenew()
	now := time.Now()
	res.verdict, res.outcome, res.reason = classify(res.status, res.err, pol.Retry4xx)
	if res.verdict == vDone {
		// Keep the slot until the delete is durable: a crash can then repeat
		// only deliveries that hold a slot, at most the host's concurrency.
		// If the delete fails (the writer logs why), the webhook stays on
		// disk and is sent again after a restart (at-least-once).
		d.opts.Queue.Delete(m)
	}

	d.mu.Lock()
	v, reason, next := d.finish(ctx, h, m, pol, res, sentAt, now, lease)
	res.quotaUntil = d.partnerLocked(h, pol, res.partner, v, now)
	h.active = now
	d.pump(h)
	d.mu.Unlock()
	d.end(m)

	if res.status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", res.status))
	}
	span.SetAttributes(attribute.String("hookpace.outcome", v.String()))
	if v != vDone {
		span.SetStatus(codes.Error, reason)
	}
	span.End()
	d.logAttempt(h.name, m, n, res, v, reason, next, now)
}

// send makes one HTTP request for m.
func (d *Dispatcher) send(ctx context.Context, m *spool.Message, pol Policy) result {
	ctx, cancel := context.WithTimeout(ctx, pol.Timeout)
	defer cancel()
	url := m.URL
	if pol.UpgradeTLS && strings.HasPrefix(url, "http://") {
		url = "https://" + url[len("http://"):]
	}
	req, err := http.NewRequestWithContext(ctx, m.Method, url, bytes.NewReader(m.Body))
	if err != nil {
		return result{err: fmt.Errorf("build request: %w", err)}
	}
	req.Header = m.Header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = nil // send none rather than Go's default
	}
	// What the receiver de-duplicates on: the id the app got with its 202.
	if pol.IDHeader != "" {
		req.Header.Set(pol.IDHeader, spool.IDString(m.OriginID()))
	}
	if pol.AttemptHeader != "" {
		req.Header.Set(pol.AttemptHeader, strconv.Itoa(m.Attempts+1))
	}
	if pol.Signer != nil { // signed with the id above and a fresh timestamp
		pol.Signer.Sign(req.Header, spool.IDString(m.OriginID()), m.Body, time.Now())
	}
	client := d.opts.Client
	if pol.InsecureSkipVerify {
		client = d.opts.Insecure
	}
	start := time.Now()
	resp, err := client.Do(req)
	took := time.Since(start)
	if err != nil {
		return result{err: err, took: took}
	}
	// Drain a little so the connection can be reused, then let it go.
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	r := result{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), took: took}
	if pol.PartnerLimits && ratelimit.Present(resp.Header) {
		in := ratelimit.Parse(resp.Header, time.Now(), cmp.Or(pol.Limits.MaxRetryAfter, 5*time.Minute))
		r.partner = &in
	}
	return r
}

// finish applies an attempt's verdict to m and h. It returns the verdict,
// a reason for anything but success, and when m is due again (retries and
// holds).
func (d *Dispatcher) finish(ctx context.Context, h *host, m *spool.Message, pol Policy, res result, sentAt, now time.Time, lease string) (verdict, string, time.Time) {
	if res.err != nil && d.ctx.Err() != nil {
		// Abandoned at shutdown: not the destination's doing. The message
		// stays queued on disk, untouched, for the next start.
		pr := pacer.Result{Outcome: pacer.NoSend, SentAt: sentAt}
		h.pace.Release(now, pr)
		d.fleetReleased(h, lease, pr, now)
		d.buffered -= int64(len(m.Body))
		return vRetry, "abandoned at shutdown", time.Time{}
	}
	v, outcome, reason := res.verdict, res.outcome, res.reason
	ra, hasRA := ParseRetryAfter(res.retryAfter, now)
	if !hasRA && v == vHold && pol.PartnerLimits {
		ra, hasRA = partnerReset(res.partner) // Retry-After wins when given
	}
	pr := pacer.Result{Outcome: outcome, SentAt: sentAt}
	if v == vHold {
		pr.RetryAfter, pr.HasRetry = ra, hasRA
	}
	breaker, _ := h.pace.Breaker()
	hold := h.pace.Release(now, pr)
	d.fleetReleased(h, lease, pr, now)
	d.breakerChanged(h, breaker, reason)

	if v != vDone {
		h.lastErr, h.lastErrAt, h.lastStatus = reason, now, res.status
	}
	if v == vHold || v == vRetry {
		if age := now.Sub(m.Enqueued); pol.MaxAge > 0 && age > pol.MaxAge {
			v, reason = vDead, fmt.Sprintf("max_age %v exceeded (last: %s)", pol.MaxAge, reason)
		}
	}
	if v != vHold {
		m.Attempts++ // a 429 holds the host and never uses up an attempt
	}
	if v == vRetry {
		if m.Attempts >= pol.MaxAttempts {
			v, reason = vDead, fmt.Sprintf("max_attempts %d reached (last: %s)", pol.MaxAttempts, reason)
		}
	}
	if v == vDead || v == vDone {
		// These leave memory for good.
		d.buffered -= int64(len(m.Body))
	}
	m.LastStatus, m.LastTry = res.status, now
	if v != vDone {
		m.LastError = reason
	}
	var next time.Time
	switch v {
	case vDone:
		// attempt has deleted m from the queue already.
		d.opts.Observer.DeliveryLatency(ctx, h.name, now.Sub(m.Enqueued))
	case vHold:
		// The held message goes first when the hold ends, and a 429 does
		// not use up an attempt.
		h.ready.pushFront(m)
		next = hold.Until
		if hold.Capped {
			d.log.Warn("Retry-After capped at max_retry_after", "host", h.name,
				"retry_after", hold.Asked.String(), "max_retry_after", pol.Limits.MaxRetryAfter.String())
		}
	case vRetry:
		delay := backoff(m.Attempts, pol.BackoffInitial, pol.BackoffMax)
		if res.status == http.StatusServiceUnavailable && hasRA {
			delay = min(ra, pol.Limits.MaxRetryAfter)
		}
		next = now.Add(delay)
		h.retry.add(next, m)
		d.opts.Queue.Update(m)
	case vDead:
		d.opts.Queue.Bury(m, reason, now)
	}
	d.opts.Observer.Delivery(ctx, h.name, v)
	return v, reason, next
}

// breakerChanged logs h's breaker moving on from state was, once per
// transition: open (no sends until the probe), half-open (the probe goes),
// closed (the host answers again). why is what the last attempt learned.
func (d *Dispatcher) breakerChanged(h *host, was, why string) {
	state, probeAt := h.pace.Breaker()
	if state == was {
		return
	}
	switch state {
	case pacer.BreakerOpen:
		d.log.Warn("breaker opened: nothing is sent to the host until one probe at probe_at", "host", h.name, "from", was,
			"probe_at", probeAt.UTC().Format(time.RFC3339Nano), "reason", why)
	case pacer.BreakerHalfOpen:
		d.log.Info("breaker half-open: sending one probe", "host", h.name)
	case pacer.BreakerClosed:
		d.log.Info("breaker closed: the host answers again", "host", h.name, "from", was)
	}
}

// logAttempt writes the canonical line for one delivery attempt. Failures
// that repeat (same host and reason) are throttled.
func (d *Dispatcher) logAttempt(host string, m *spool.Message, n int, res result, v verdict, reason string, next, now time.Time) {
	attrs := []any{
		"host", host,
		"id", spool.IDString(m.OriginID()),
		"attempt", n,
		"outcome", v.String(),
		"status", res.status,
		"duration_ms", float64(res.took.Microseconds()) / 1000,
		"age_ms", now.Sub(m.Enqueued).Milliseconds(),
	}
	if reason != "" {
		attrs = append(attrs, "reason", reason)
	}
	if !next.IsZero() {
		attrs = append(attrs, "next_at", next.UTC().Format(time.RFC3339Nano))
	}
	switch {
	case !res.quotaUntil.IsZero():
		attrs = append(attrs, "hold", pacer.HoldQuota, "held_until", res.quotaUntil.UTC().Format(time.RFC3339Nano))
	case v == vHold && res.outcome == pacer.Unresolved:
		attrs = append(attrs, "hold", pacer.HoldDNS)
	case v == vHold:
		attrs = append(attrs, "hold", "429")
	}
	if v == vDone || v == vDead || d.opts.Throttle == nil {
		d.log.Info("delivery", attrs...)
		return
	}
	ok, suppressed := d.opts.Throttle.Allow(host+"|"+reason, now)
	if !ok {
		return
	}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	d.log.Info("delivery", attrs...)
}

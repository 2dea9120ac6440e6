package deliver

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookpace/hookpace/pacer"
	"github.com/hookpace/hookpace/partnerlimit"
	"github.com/hookpace/hookpace/spool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
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

	answer     []byte             // the start of a 400's body: does it say the batch was too big? (batchsplit.go)
	partner    *partnerlimit.Info // what the answer said of the partner's limits (partner.go)
	quotaUntil time.Time          // the answer held the host until then (quota used up)

	// For the journal (journal.go): the answer's header and first bytes.
	header  http.Header
	excerpt []byte
}

// attempt sends m once and applies the verdict. It runs on its own
// goroutine, holding one of the host's slots.
func (d *Dispatcher) attempt(h *host, m *spool.Message, pol Policy, sentAt time.Time, lease string) {
	defer d.wg.Done()
	d.begin(h, m) // see coalesce.go
	ctx, span := d.opts.Tracer.Start(d.traceParent(m.Header), "hookpace.deliver", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("hookpace.host", m.Host),
			attribute.String("hookpace.message_id", m.Ref().String()),
			attribute.Int("hookpace.attempt", m.Attempts+1),
		))
	n := m.Attempts + 1 // m is ours until finish puts it back
	res := d.send(ctx, m, pol)
	now := time.Now()
	res.verdict, res.outcome, res.reason = classify(res.status, res.err, pol.Retry4xx)
	res.scrub(pol.Auth)
	d.journalAttempt(m, res, now, 1)
	d.autoPause(h.name, pol, res, now)
	if res.verdict == vDone {
		// Keep the slot until the delete is durable: a crash can then repeat
		// only deliveries that hold a slot, at most the host's concurrency.
		// If the delete fails (the writer logs why), the webhook stays on
		// disk and is sent again after a restart (at-least-once).
		d.opts.Store.Delete(m)
	}

	d.mu.Lock()
	v, reason, next := d.finish(ctx, h, m, pol, res, sentAt, now, lease)
	res.quotaUntil = d.partnerLocked(h, pol, res.partner, v, now)
	h.active = now
	d.slotDone(h)
	d.mu.Unlock()
	d.end(m)

	d.attemptEnded(span, attemptEnd{host: h.name, id: m.Ref().String(), enqueued: m.Enqueued, n: n,
		res: res, v: v, reason: reason, next: next, now: now})
}

// send makes one HTTP request for m.
func (d *Dispatcher) send(ctx context.Context, m *spool.Message, pol Policy) result {
	hdr := m.Header.Clone()
	if hdr == nil {
		hdr = http.Header{}
	}
	return d.post(ctx, pol, m.Method, m.URL, hdr, m.Body, m.Ref().String(), m.Attempts+1)
}

// post makes one HTTP request: a webhook, or a batch of them. id is what
// the receiver de-duplicates on, attempt counts from 1; hdr is the
// request's own.
func (d *Dispatcher) post(ctx context.Context, pol Policy, method, url string, hdr http.Header, body []byte, id string, attempt int) result {
	ctx, cancel := context.WithTimeout(ctx, pol.Timeout)
	defer cancel()
	if pol.UpgradeTLS && strings.HasPrefix(url, "http://") {
		url = "https://" + url[len("http://"):]
	}
	// hookpace's own queueing headers never reach the partner, whichever
	// version spooled the webhook.
	spool.StripControlHeaders(hdr)
	if _, ok := hdr["User-Agent"]; !ok {
		hdr["User-Agent"] = nil // send none rather than Go's default
	}
	pol.Rewrite.Apply(hdr) // the host's header rules; hookpace's own headers and the signature follow
	// What the receiver de-duplicates on: the id the app got with its 202.
	if pol.IDHeader != "" {
		hdr.Set(pol.IDHeader, id)
	}
	if pol.AttemptHeader != "" {
		hdr.Set(pol.AttemptHeader, strconv.Itoa(attempt))
	}
	if pol.Signer != nil { // signed with the id above and a fresh timestamp
		pol.Signer.Sign(hdr, id, body, time.Now())
	}
	client := d.opts.Client
	if pol.InsecureSkipVerify {
		client = d.opts.Insecure
	}
	if c := pol.Auth.Client(); c != nil {
		client = c // presents the host's client certificate
	}
	start := time.Now()
	var resp *http.Response
	for try := 0; ; try++ {
		h := hdr
		if pol.Auth != nil {
			// The credentials go on a copy, made at the moment of the
			// attempt: never in what is stored or retried.
			h = hdr.Clone()
			if err := pol.Auth.Apply(ctx, h); err != nil {
				return result{err: authError{err}, took: time.Since(start)}
			}
		}
		req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		if err != nil {
			return result{err: fmt.Errorf("build request: %w", err)}
		}
		req.Header = h
		if resp, err = client.Do(req); err != nil {
			return result{err: err, took: time.Since(start)}
		}
		// A 401 to a token: the partner refused it (revoked, rotated
		// early). One more try with a new token, within this attempt; a
		// 401 to that fresh token too is a token failure like the
		// endpoint's own: the host is held, the webhook's attempts kept.
		if resp.StatusCode != http.StatusUnauthorized || !pol.Auth.Rejected(hdr) {
			break
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if try > 0 {
			return result{err: authError{errors.New("auth: the partner refused a freshly fetched token (401)")}, took: time.Since(start)}
		}
	}
	took := time.Since(start)
	r := result{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), took: took}
	r.readAnswer(resp, d.excerptMax())
	// Drain a little so the connection can be reused, then let it go.
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if pol.PartnerLimits && partnerlimit.Present(resp.Header) {
		in := partnerlimit.Parse(resp.Header, time.Now(), cmp.Or(pol.Limits.MaxRetryAfter, 5*time.Minute))
		r.partner = &in
	}
	return r
}

// finish applies an attempt's verdict to m and h. It returns the verdict,
// a reason for anything but success, and when m is due again (retries and
// holds).
func (d *Dispatcher) finish(ctx context.Context, h *host, m *spool.Message, pol Policy, res result, sentAt, now time.Time, lease string) (verdict, string, time.Time) {
	if d.abandoned(h, res, sentAt, now, lease) {
		// The message stays queued on disk, untouched, for the next start.
		d.release(h, m)
		return vRetry, "abandoned at shutdown", time.Time{}
	}
	hold, ra, hasRA := d.settle(h, pol, res, sentAt, now, lease)
	v, reason := d.judge(h, m, pol, res, now)
	var next time.Time
	switch v {
	case vDone:
		// attempt has deleted m from the queue already.
		d.countDelivered(h, 1)
		d.opts.Observer.DeliveryLatency(ctx, h.name, now.Sub(m.Enqueued))
	case vHold:
		// The held message goes first when the hold ends, and a 429 does
		// not use up an attempt.
		h.ready.pushFront(m)
		next = d.held(h, pol, hold)
	case vRetry:
		next = now.Add(retryDelay(m.Attempts, pol, res, ra, hasRA))
		h.retry.add(next, m)
	}
	d.opts.Observer.Delivery(ctx, h.name, v)
	return v, reason, next
}

// abandoned reports whether the attempt was cut short by shutdown (not
// the destination's doing), and if so gives its slot back as unused.
func (d *Dispatcher) abandoned(h *host, res result, sentAt, now time.Time, lease string) bool {
	if res.err == nil || d.ctx.Err() == nil {
		return false
	}
	pr := pacer.Result{Outcome: pacer.NoSend, SentAt: sentAt}
	h.gate.Release(now, lease, pr)
	return true
}

// settle gives the attempt's slot back and tells h's gate what the
// answer said: a hold, a failure, a success. It returns
// the hold and the answer's Retry-After (or the partner's reset).
func (d *Dispatcher) settle(h *host, pol Policy, res result, sentAt, now time.Time, lease string) (pacer.Hold, time.Duration, bool) {
	ra, hasRA := ParseRetryAfter(res.retryAfter, now)
	if !hasRA && res.verdict == vHold && pol.PartnerLimits {
		ra, hasRA = partnerReset(res.partner) // Retry-After wins when given
	}
	pr := pacer.Result{Outcome: res.outcome, SentAt: sentAt, Status: res.status}
	if res.verdict == vHold {
		pr.RetryAfter, pr.HasRetry = ra, hasRA
	}
	breaker, _ := h.gate.Breaker()
	hold := h.gate.Release(now, lease, pr)
	d.breakerChanged(h, breaker, res.reason)
	if res.verdict != vDone {
		h.lastErr, h.lastErrAt, h.lastStatus = res.reason, now, res.status
	}
	return hold, ra, hasRA
}

// judge decides what the attempt's answer means for m: max_age and
// max_attempts turn a retry (or a hold) into a dead letter. It records
// the attempt in m, persists m's state for a retry and buries a dead
// letter; placing m in h's queues is the caller's.
func (d *Dispatcher) judge(h *host, m *spool.Message, pol Policy, res result, now time.Time) (verdict, string) {
	if d.purgedInFlight(h, m, res.verdict, now) {
		return vDead, "purged by an operator while in flight"
	}
	v, reason := res.verdict, res.reason
	if v == vHold || v == vRetry {
		if age := now.Sub(m.Enqueued); pol.MaxAge > 0 && age > pol.MaxAge {
			v, reason = vDead, fmt.Sprintf("max_age %v exceeded (last: %s)", pol.MaxAge, reason)
		}
	}
	if v != vHold {
		m.Attempts++ // a 429 holds the host and never uses up an attempt
	}
	if v == vRetry && m.Attempts >= pol.MaxAttempts {
		v, reason = vDead, fmt.Sprintf("max_attempts %d reached (last: %s)", pol.MaxAttempts, reason)
	}
	if v == vDead || v == vDone {
		// These leave memory for good.
		d.release(h, m)
	}
	m.LastStatus, m.LastTry = res.status, now
	if v != vDone {
		m.LastError = reason
	}
	switch v {
	case vRetry:
		d.opts.Store.Update(m)
	case vDead:
		d.opts.Store.Bury(m, reason, now)
		d.emitDead(m, reason, now)
		d.orderedDead(h, m, reason)
	}
	return v, reason
}

// held returns when a hold of h ends, warning when Retry-After was capped.
func (d *Dispatcher) held(h *host, pol Policy, hold pacer.Hold) time.Time {
	if hold.Capped {
		d.log.Warn("Retry-After capped at max_retry_after", "host", h.name,
			"retry_after", hold.Asked.String(), "max_retry_after", pol.Limits.MaxRetryAfter.String())
	}
	return hold.Until
}

// retryDelay is how long a message that failed its attempts-th attempt
// waits: the backoff, or a 503's Retry-After.
func retryDelay(attempts int, pol Policy, res result, ra time.Duration, hasRA bool) time.Duration {
	if res.status == http.StatusServiceUnavailable && hasRA {
		return min(ra, pol.Limits.MaxRetryAfter)
	}
	return backoff(attempts, pol.BackoffInitial, pol.BackoffMax)
}

// breakerChanged logs h's breaker moving on from state was, once per
// transition: open (no sends until the probe), half-open (the probe goes),
// closed (the host answers again). why is what the last attempt learned.
func (d *Dispatcher) breakerChanged(h *host, was, why string) {
	state, probeAt := h.gate.Breaker()
	if state == was {
		return
	}
	d.emitBreaker(h, was, state, probeAt, why)
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

// attemptEnd is what one finished attempt, of a webhook or a batch, says
// in its span and its canonical log line.
type attemptEnd struct {
	host, id string
	enqueued time.Time // of the (first) webhook sent
	n        int       // the attempt's number
	res      result
	v        verdict
	reason   string
	next     time.Time // when it goes again; zero: not
	now      time.Time
	webhooks int // a batch's members; 0 for a webhook sent alone
	dead     int // a batch's members that died while the batch did not
}

// attemptEnded closes an attempt's span and writes its canonical line.
// Failures that repeat (same host and reason) are throttled.
func (d *Dispatcher) attemptEnded(span trace.Span, e attemptEnd) {
	if e.res.status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", e.res.status))
	}
	span.SetAttributes(attribute.String("hookpace.outcome", e.v.String()))
	if e.v != vDone {
		span.SetStatus(codes.Error, e.reason)
	}
	span.End()
	d.logAttempt(e)
}

// logAttempt writes the canonical line for one delivery attempt.
func (d *Dispatcher) logAttempt(e attemptEnd) {
	if !d.log.Enabled(d.ctx, slog.LevelInfo) {
		return // below log.level: not even its attributes are built
	}
	res, v, reason, next, now := e.res, e.v, e.reason, e.next, e.now
	attrs := []any{
		"host", e.host,
		"id", e.id,
		"attempt", e.n,
		"outcome", v.String(),
		"status", res.status,
		"duration_ms", float64(res.took.Microseconds()) / 1000,
		"age_ms", now.Sub(e.enqueued).Milliseconds(),
	}
	if e.webhooks > 0 {
		attrs = append(attrs, "webhooks", e.webhooks)
	}
	if e.dead > 0 {
		attrs = append(attrs, "dead", e.dead)
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
	case v == vHold && res.outcome == pacer.AuthFailed:
		attrs = append(attrs, "hold", pacer.HoldAuth)
	case v == vHold:
		attrs = append(attrs, "hold", "429")
	}
	if v == vDone || v == vDead || d.opts.Throttle == nil {
		d.log.Info("delivery", attrs...)
		return
	}
	ok, suppressed := d.opts.Throttle.Allow(e.host+"|"+reason, now)
	if !ok {
		return
	}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	d.log.Info("delivery", attrs...)
}

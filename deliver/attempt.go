package deliver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	neturl "net/url"
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

	// For the journal (maxage.go): the answer's header and first bytes.
	header  http.Header
	excerpt []byte
}

// request is what one attempt sends: a webhook alone, or the members of
// a batch as one request (batch.go). A webhook alone is a batch of one
// that goes as it came, with its own header, body and id.
type request struct {
	ms    []*spool.Message // in the order they are sent
	batch bool             // ms go as a batch's body, even a batch of one
}

// id is what the receiver de-duplicates r on: the webhook's id, or the
// batch's (batchID).
func (r request) id() string {
	if r.batch {
		return batchID(r.ms)
	}
	return r.ms[0].Ref().String()
}

// attempt sends r once and applies the verdict to each of its webhooks.
// It runs on its own goroutine, holding one of the host's slots.
func (d *Dispatcher) attempt(h *host, r request, pol *Policy, sentAt time.Time, lease string) {
	defer d.wg.Done()
	for _, m := range r.ms {
		d.begin(h, m) // see coalesce.go: a webhook's content may be replaced
	}
	if r.batch {
		if r.ms = d.keepBatchable(h, r.ms, sentAt, lease); len(r.ms) == 0 {
			return
		}
	}
	n := 0 // the attempt's number; the webhooks are ours until finish puts them back
	for _, m := range r.ms {
		n = max(n, m.Attempts+1)
	}
	id := r.id()
	ctx, span := d.startSpan(h, r, id, n)
	res := d.send(ctx, r, pol, id, n)
	now := time.Now()
	res.verdict, res.outcome, res.reason = classify(res.status, res.err, pol.Retry4xx)
	res.scrub(pol.Auth)
	res.scrubEcho(r.ms, pol.Rewrite)
	if len(r.ms) > 1 && tooLarge(res.status, res.answer) {
		res.verdict, res.reason = vSplit, fmt.Sprintf("status %d: too large, split in two", res.status)
	}
	for _, m := range r.ms {
		d.journalAttempt(m, res, now, len(r.ms))
	}
	d.autoPause(h.name, pol, res, now)
	who := attemptEnd{host: h.name, id: id, enqueued: r.ms[0].Enqueued, n: n, now: now}
	if r.batch {
		who.webhooks = len(r.ms)
	}
	if res.verdict == vDone {
		// The partner has answered: the slot goes back now, and the
		// webhooks stay out until their delete is settled (slots.go);
		// land ends the delivery then, on another goroutine.
		l := &landing{h: h, r: r, pol: pol, ctx: ctx, span: span, res: res, sentAt: sentAt, lease: lease, who: who}
		l.quotaUntil = d.answered(h, pol, res, sentAt, now, lease)
		d.wg.Add(1) // done in land
		d.opts.Store.DeleteThen(r.ms, func(error) { d.deleted(l) })
		return
	}

	d.mu.Lock()
	e := d.finish(ctx, h, r, pol, res, sentAt, now, lease, false)
	e.res.quotaUntil = d.partnerLocked(h, pol, res.partner, e.v, now)
	h.active = now.UnixNano()
	d.slotDone(h)
	d.mu.Unlock()
	for _, m := range r.ms {
		d.end(m)
	}
	d.attemptEnded(span, e.of(who))
}

// startSpan starts the span of an attempt of r, hookpace.deliver, inside
// the attempt's CONSUMER span (startConsumer); ending it ends both.
func (d *Dispatcher) startSpan(h *host, r request, id string, n int) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{
		attribute.String("hookpace.host", h.name),
		attribute.String("hookpace.message_id", id),
		attribute.Int("hookpace.attempt", n),
	}
	ctx, consumer := d.startConsumer(h.name, id, r.ms, r.batch)
	if r.batch {
		attrs = append(attrs, attribute.Int("hookpace.batch_size", len(r.ms)))
	}
	ctx, span := d.opts.Tracer.Start(ctx, "hookpace.deliver", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return ctx, spanPair{Span: span, consumer: consumer}
}

// send makes r's HTTP request: a webhook with a copy of its own header,
// or a batch with the header its members share and their encoded bodies.
func (d *Dispatcher) send(ctx context.Context, r request, pol *Policy, id string, n int) result {
	m := r.ms[0]
	if r.batch {
		return d.post(ctx, pol, m.Method, m.Host, m.URL, batchHeader(r.ms), encodeBatch(pol.Batch, r.ms), id, n)
	}
	hdr := m.Header.Clone()
	if hdr == nil {
		hdr = http.Header{}
	}
	return d.post(ctx, pol, m.Method, m.Host, m.URL, hdr, m.Body, id, n)
}

// hostHeader is the Host header for u: its host, with the port only when
// it is not the scheme's default (a URL spooled as https://name:443/
// sends Host: name, as a client going to the partner directly would).
func hostHeader(u *neturl.URL) string {
	port := u.Port()
	if u.Scheme == "https" && port == "443" || u.Scheme == "http" && port == "80" {
		h := u.Hostname()
		if strings.Contains(h, ":") {
			return "[" + h + "]" // IPv6
		}
		return h
	}
	return u.Host
}

// post makes one HTTP request to host: a webhook, or a batch of them. id
// is what the receiver de-duplicates on, attempt counts from 1; hdr is
// the request's own.
func (d *Dispatcher) post(ctx context.Context, pol *Policy, method, host, url string, hdr http.Header, body []byte, id string, attempt int) result {
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, attemptKey{}, attempt), pol.Timeout)
	defer cancel()
	if pol.UpgradeTLS && strings.HasPrefix(url, "http://") {
		url = "https://" + url[len("http://"):]
	}
	// hookpace's own queueing headers never reach the partner, whichever
	// version spooled the webhook.
	spool.StripControlHeaders(hdr)
	signer := pol.Signer
	if route, ok := spool.Door(hdr); ok {
		signer = pol.Doors[route] // verified at that door: signed by its route alone
	}
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
	if signer != nil { // signed with the id above and a fresh timestamp
		signer.Sign(hdr, host, id, body, time.Now())
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
		// Built by the builder ingest checked it with; a request that
		// can't be built is its own failure (unsendable), never the host's.
		req, err := spool.NewRequest(ctx, method, url, hdr, body)
		if err != nil {
			return result{err: unsendable{err}}
		}
		if pol.Auth != nil {
			// The credentials go on a copy, made at the moment of the
			// attempt: never in what is stored or retried.
			h := hdr.Clone()
			if err := pol.Auth.Apply(ctx, h); err != nil {
				return result{err: authError{err}, took: time.Since(start)}
			}
			req.Header = h
		}
		req.Host = hostHeader(req.URL)
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

// finish applies an attempt's verdict to each webhook of r and to h.
// Its answer says the request's verdict (a webhook alone: its own, after
// max_age and max_attempts), the reason for anything but success, when
// the webhooks are due again (retries and holds), and how many of a
// batch's members went to the dead letters although the request's
// verdict was not dead.
//
// released says that answered gave the attempt's slot back already (a
// delivery, its delete settled: land).
func (d *Dispatcher) finish(ctx context.Context, h *host, r request, pol *Policy, res result, sentAt, now time.Time, lease string, released bool) attemptEnd {
	e := attemptEnd{res: res, v: res.verdict, reason: res.reason}
	h.extra -= len(r.ms) - 1
	if d.abandoned(h, res, sentAt, now, lease) {
		for _, m := range r.ms {
			d.release(h, m) // they stay queued on disk, untouched, for the next start
		}
		e.v, e.reason = vRetry, "abandoned at shutdown"
		return e
	}
	var hold pacer.Hold
	var ra time.Duration
	var hasRA bool
	if !released {
		hold, ra, hasRA = d.settle(h, pol, res, sentAt, now, lease)
	}
	if res.verdict == vSplit { // not an attempt: the members are not judged
		h.win.Split(r.ms, now)
		d.opts.Observer.Delivery(ctx, h.name, vSplit)
		d.opts.Observer.BatchWebhooks(ctx, h.name, vSplit, len(r.ms))
		return e
	}
	var held, retry []*spool.Message
	var counts [NumOutcomes]int
	attempts := 0
	for _, m := range r.ms {
		v, reason := d.judge(h, m, pol, res, now)
		if !r.batch {
			e.v, e.reason = v, reason
		}
		counts[v]++
		switch v {
		case vDone:
			// attempt has deleted m from the queue already.
			d.countDelivered(h, 1)
			d.opts.Observer.DeliveryLatency(ctx, h.name, now.Sub(m.Enqueued))
		case vHold:
			held = append(held, m)
		case vRetry:
			retry = append(retry, m)
			attempts = max(attempts, m.Attempts)
		}
	}
	if len(held) > 0 {
		// First in line again when the hold ends, in their order, and a
		// 429 does not use up an attempt.
		h.win.Hold(held)
		e.next = d.held(h, pol, hold)
	}
	if len(retry) > 0 {
		e.next = now.Add(retryDelay(attempts, pol, res, ra, hasRA))
		if r.batch {
			h.win.RetryBatchAt(e.next, retry)
		} else {
			h.win.RetryAt(e.next, retry[0])
		}
	}
	d.opts.Observer.Delivery(ctx, h.name, e.v)
	if r.batch {
		if res.verdict == vDone {
			h.batches.requests++
			h.batches.webhooks += int64(len(r.ms))
		}
		for v, n := range counts {
			if n > 0 {
				d.opts.Observer.BatchWebhooks(ctx, h.name, verdict(v), n)
			}
		}
		if e.v != vDead {
			e.dead = counts[vDead] // members past max_age or max_attempts
		}
	}
	return e
}

// abandoned reports whether the attempt was cut short by shutdown (not
// the destination's doing), and if so gives its slot back as unused.
func (d *Dispatcher) abandoned(h *host, res result, sentAt, now time.Time, lease string) bool {
	if res.err == nil || d.ctx.Err() == nil {
		return false
	}
	pr := pacer.Result{Outcome: pacer.NoSend, SentAt: sentAt}
	h.release(now, lease, pr)
	return true
}

// settle gives the attempt's slot back and tells h's gate what the
// answer said: a hold, a failure, a success. It returns
// the hold and the answer's Retry-After (or the partner's reset).
func (d *Dispatcher) settle(h *host, pol *Policy, res result, sentAt, now time.Time, lease string) (pacer.Hold, time.Duration, bool) {
	ra, hasRA := ParseRetryAfter(res.retryAfter, now)
	if !hasRA && res.verdict == vHold && pol.PartnerLimits {
		ra, hasRA = partnerReset(res.partner) // Retry-After wins when given
	}
	pr := pacer.Result{Outcome: res.outcome, SentAt: sentAt, Status: res.status}
	if res.verdict == vHold {
		pr.RetryAfter, pr.HasRetry = ra, hasRA
	}
	breaker, _ := h.gate.Breaker()
	hold := h.release(now, lease, pr)
	d.breakerChanged(h, breaker, res.reason)
	var un unsendable
	if res.verdict != vDone && !errors.As(res.err, &un) {
		t := h.troubleW()
		t.lastErr, t.lastErrAt, t.lastStatus = res.reason, now, res.status
	}
	return hold, ra, hasRA
}

// judge decides what the attempt's answer means for m: max_age and
// max_attempts turn a retry (or a hold) into a dead letter. It records
// the attempt in m, persists m's state for a retry and buries a dead
// letter; placing m in h's queues is the caller's.
func (d *Dispatcher) judge(h *host, m *spool.Message, pol *Policy, res result, now time.Time) (verdict, string) {
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
		h.win.OrderedDead(m, reason)
	}
	return v, reason
}

// held returns when a hold of h ends, warning when Retry-After was capped.
func (d *Dispatcher) held(h *host, pol *Policy, hold pacer.Hold) time.Time {
	if hold.Capped {
		d.log.Warn("Retry-After capped at max_retry_after", "host", h.name,
			"retry_after", hold.Asked.String(), "max_retry_after", pol.Limits.MaxRetryAfter.String())
	}
	return hold.Until
}

// retryDelay is how long a message that failed its attempts-th attempt
// waits: the backoff, or a 503's Retry-After.
func retryDelay(attempts int, pol *Policy, res result, ra time.Duration, hasRA bool) time.Duration {
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

// of is e with the attempt's identity (host, id, arrival, number, time
// and batch members) taken from who.
func (e attemptEnd) of(who attemptEnd) attemptEnd {
	e.host, e.id, e.enqueued, e.n, e.now, e.webhooks = who.host, who.id, who.enqueued, who.n, who.now, who.webhooks
	return e
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

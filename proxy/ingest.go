package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/elazarl/goproxy"
	"github.com/hookpace/hookpace/handoff"
	"github.com/hookpace/hookpace/spool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

func (p *Proxy) onRequest(r *http.Request, ctx *goproxy.ProxyCtx) (*http.Request, *http.Response) {
	start := time.Now()
	pol := p.policy.Load()
	user, authorized := p.authorize(r, ctx, pol)
	rule, webhook := pol.classify(r)
	if authorized && !webhook {
		// Passthrough: forwarded synchronously, unspooled. The transport's
		// dialer applies the egress policy.
		if err := CheckTarget(r.URL); err != nil {
			host := HostKey(r.URL)
			d := badRequest(err.Error())
			p.record(r, start, host, 0, d)
			return nil, d.response(r, host)
		}
		if d, refused := pol.appRefusal(r.URL); refused {
			host := HostKey(r.URL)
			p.record(r, start, host, 0, d)
			return nil, d.response(r, host)
		}
		if !pol.spools(r.Method) {
			p.noticePassthrough(pol, r.Method, HostKey(r.URL))
		}
		// Its ingest line is written once the answer is known
		// (onPassthroughResponse), with the status and the time taken.
		// goproxy makes a ProxyCtx per request, also inside a MITM'd
		// tunnel (where UserData is a copy of the CONNECT's): this one
		// is the request's own.
		ctx.UserData = passStart(start)
		return r, nil
	}
	// Spooled methods reach here from inside a MITM'd tunnel; plain ones
	// take serveIngest without goproxy.
	host, size, d := p.handle(r, pol, HostKey(r.URL), user, authorized)
	d.rule = rule
	p.record(r, start, host, size, d)
	return nil, d.response(r, host)
}

// serveIngest handles an absolute-form POST (what HTTP_PROXY clients send)
// directly, without goproxy's per-request machinery: this is the hot path.
// body is the request's body as net/http made it, under any wrapper; host
// is its HostKey.
func (p *Proxy) serveIngest(w http.ResponseWriter, r *http.Request, body io.ReadCloser, host, rule string) {
	start := time.Now()
	pol := p.policy.Load()
	seen := &seenBody{ReadCloser: r.Body}
	r.Body = seen
	user, authorized := p.authorize(r, nil, pol)
	host, size, d := p.handle(r, pol, host, user, authorized)
	d.rule = rule
	p.record(r, start, host, size, d)
	answer := d.answer(w.Header(), host)
	if d.status != http.StatusAccepted && d.status != http.StatusRequestTimeout && seen.mustDrain(r) {
		drainAfter(w, r, d.status, answer, max(4*pol.MaxBody, drainMin))
		return
	}
	if seen.eof && body != nil {
		// Read to its end: closed and given back to the server as it
		// made it, which then knows there is nothing left to discard
		// (under a wrapper it would try to read on).
		body.Close()
		r.Body = body
	}
	w.WriteHeader(d.status)
	w.Write(answer)
}

// handle makes the ingest decision for one POST to host (its HostKey),
// sent by the proxy user user ("" without proxy auth); the host it gives
// back is "" when the sender is not authorized.
func (p *Proxy) handle(r *http.Request, pol *Policy, host, user string, authorized bool) (_ string, size int, d decision) {
	if !authorized {
		return "", 0, unauthorized()
	}
	if !p.opts.Tracing {
		// The app's traceparent is stored with the other headers and
		// carried to the partner unchanged.
		d, size = p.decide(r.Context(), r, pol, host, user, nil)
		return host, size, d
	}
	ctx := p.opts.Prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := p.opts.Tracer.Start(ctx, "hookpace.ingest", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("hookpace.host", host), attribute.String("http.request.method", r.Method)))
	d, size = p.decide(ctx, r, pol, host, user, nil)
	span.SetAttributes(attribute.String("hookpace.outcome", d.outcome.String()), attribute.Int("http.response.status_code", d.status))
	if d.status >= 400 {
		span.SetStatus(codes.Error, d.reason)
	}
	span.End()
	return host, size, d
}

// messagingSystem is messaging.system on the spans that show the spool
// as a queue: the PRODUCER span at ingest, a CONSUMER span per attempt.
const messagingSystem = "hookpace"

// decide makes the ingest decision for r; in is set for a webhook that
// came through an inbound route (inbound.go), whose idempotency key is the
// provider's delivery id rather than the proxy's header.
func (p *Proxy) decide(ctx context.Context, r *http.Request, pol *Policy, host, user string, in *Inbound) (d decision, size int) {
	if d := p.stopping.Load(); d != nil {
		return *d, 0
	}
	if err := CheckTarget(r.URL); err != nil {
		return badRequest(err.Error()), 0
	}
	if in == nil {
		if d, ok := pol.appRefusal(r.URL); ok {
			return d, 0
		}
	}
	hp := pol.Host(host)
	// Refuse destinations known to be forbidden before storing anything,
	// without waiting on DNS: a name not known yet or not resolving is
	// spooled, and delivery checks it when it dials (a refusal is then a
	// dead letter with the reason, no answer a host failure it retries).
	if d, ok := refused(p.verdicts.Known(r.URL.Hostname(), destPort(r.URL), p.opts.Guard.CheckPort)); ok {
		return d, 0
	}
	if full := p.opts.Spool.Full(); full != nil {
		return p.full(full), 0
	}
	maxBody := pol.MaxBody
	if r.ContentLength > maxBody {
		return tooLarge(r.ContentLength, maxBody), 0
	}
	if n := headerBytes(r.Header); pol.MaxHeader > 0 && n > pol.MaxHeader {
		return headersTooLarge(n, pol.MaxHeader), 0
	}
	key, bad := idempotencyKey(r.Header, pol, hp.DedupeWindow)
	if in != nil {
		key, bad = inboundKey(in.Key, hp.DedupeWindow)
	}
	if bad != nil {
		return *bad, 0
	}
	header := storedHeader(r.Header)
	ckey, bad := coalesceKey(header, pol)
	if bad != nil {
		return *bad, 0
	}
	now := time.Now()
	lane, bad := p.admitLane(r, &hp, host, user, now)
	if bad != nil {
		return *bad, 0
	}
	if p.opts.Tracing {
		// The stored trace context is the PRODUCER span's (from here to the
		// spool's answer), so that each attempt's CONSUMER span continues
		// the app's trace across the spool, the wait showing as the gap
		// between the two.
		var producer trace.Span
		ctx, producer = p.opts.Tracer.Start(ctx, "send "+host, trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(semconv.MessagingSystemKey.String(messagingSystem), semconv.MessagingOperationTypeSend,
				semconv.MessagingOperationName("send"), semconv.MessagingDestinationName(host)))
		defer func() {
			if d.status >= 400 {
				producer.SetStatus(codes.Error, d.reason)
			}
			producer.End()
		}()
		p.opts.Prop.Inject(ctx, propagation.HeaderCarrier(header))
	}
	m := &spool.Message{
		Host:     host,
		Method:   r.Method,
		URL:      r.URL.String(),
		Header:   header,
		Enqueued: now,
	}
	lane.set(m) // before the body is read into the record
	if ckey != "" {
		m.Coal = &spool.Coalescing{Key: ckey} // in the record too
	}
	markDoor(m, in)
	// What is acknowledged can be sent: judged here by the builder
	// delivery uses (the body is a reader to it, whatever its bytes).
	if err := spool.CheckRequest(m.Method, m.URL, m.Header); err != nil {
		return badRequest("not deliverable as sent: " + err.Error()), 0
	}
	if n := r.ContentLength; n > spool.MaxRecordSize-(2<<20) && m.RecordSize(int(n)) > spool.MaxRecordSize {
		return tooLargeForSpool(), 0 // without reading a body that could never be stored
	}
	if err := readBody(r, m, maxBody); err != nil {
		if errors.Is(err, errTooLarge) {
			return tooLarge(-1, maxBody), 0
		}
		if d, ok := bodyTimedOut(err); ok {
			return d, 0
		}
		return badRequest("reading body: " + err.Error()), 0
	}
	hp.RewriteHeaders.Strip(m.Header) // a removed header is never stored
	if d, refused := p.rewriteBody(ctx, host, hp.Rewrite, m); refused {
		return d, len(m.Body)
	}
	if d, refused := p.handoff(r, pol, host, hp.FairnessKey, m); refused {
		return d, len(m.Body)
	}
	handedDoor(m, r)
	keys := spool.Keys{Idempotency: key, Coalesce: ckey, Scope: keyScope(user, in)}
	if in == nil && len(r.Header[handoff.BatchHeader]) > 0 {
		return p.handoffBatch(ctx, r, pol, m, hp, keys), len(m.Body)
	}
	ok, err := p.appendKeys(ctx, m, hp, keys)
	return p.appended(ok, err), len(m.Body)
}

// appended is the answer to a webhook whose append gave ok and err.
func (p *Proxy) appended(ok decision, err error) decision {
	if err == nil {
		return ok
	}
	var full *spool.FullError
	var werr *spool.WriteError
	switch {
	case errors.As(err, &full):
		return p.full(full)
	case errors.Is(err, spool.ErrTooLarge):
		return tooLargeForSpool()
	case errors.As(err, &werr), errors.Is(err, spool.ErrClosed):
		return decision{outcome: outcomeError, status: http.StatusServiceUnavailable, reason: "not stored: " + err.Error(),
			header: http.Header{"Retry-After": {"5"}}}
	default:
		return decision{outcome: outcomeError, status: http.StatusServiceUnavailable, reason: "not stored: " + err.Error()}
	}
}

var errTooLarge = errors.New("body too large")

// readBody reads the whole body into m, at most limit bytes. When the length
// is known, as it is for almost every webhook, the body goes straight into
// the buffer its spool record is written from.
func readBody(r *http.Request, m *spool.Message, limit int64) error {
	if n := r.ContentLength; n >= 0 {
		return m.ReadBody(r.Body, int(n))
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return err
	}
	if int64(len(body)) > limit {
		return errTooLarge
	}
	m.Body = body
	return nil
}

// full is the backpressure answer: 429 with a Retry-After estimated from the
// spool's drain rate or, for a host at its max_queued, from that host's
// pacing.
func (p *Proxy) full(e *spool.FullError) decision {
	reason := "spool past its high-water mark; retry later"
	// Nothing leaving the spool (every host paused or held): no rate says
	// how soon, and it may be long; the most this proxy advises.
	ra := maxRetryAfter
	if !e.NoEstimate {
		ra = boundRetryAfter(e.RetryAfter)
	}
	if e.Host != "" {
		reason = "queue for " + e.Host + " is at max_queued; retry later"
		ra = p.hostRetryAfter(e.Host, e.Over)
	}
	secs := max(1, int((ra+time.Second-1)/time.Second))
	return decision{outcome: outcomeBackpressure, status: http.StatusTooManyRequests, reason: reason,
		header: http.Header{"Retry-After": {strconv.Itoa(secs)}}}
}

// hostRetryAfter is how soon a host at its max_queued will have room, over
// of its queued webhooks having to leave first, as its pacing says: after
// its hold, at its current rate.
func (p *Proxy) hostRetryAfter(host string, over int64) time.Duration {
	if p.opts.Pacing != nil {
		if d, ok := p.opts.Pacing.DrainTime(host, over, time.Now()); ok {
			return boundRetryAfter(d)
		}
	}
	return unknownRetryAfter
}

// Bounds of the Retry-After given with backpressure, the proxy's HTTP
// policy: estimates from the spool's drain rate or a host's pacing are kept
// between minRetryAfter and maxRetryAfter; maxRetryAfter is given when the
// spool is not draining, and unknownRetryAfter when nothing says how soon a
// host at its max_queued will be.
const (
	minRetryAfter     = time.Second
	maxRetryAfter     = 5 * time.Minute
	unknownRetryAfter = 30 * time.Second
)

func boundRetryAfter(d time.Duration) time.Duration {
	return min(max(d, minRetryAfter), maxRetryAfter)
}

// record writes the decision's canonical log line and metric.
func (p *Proxy) record(r *http.Request, start time.Time, host string, size int, d decision) {
	ctx := r.Context()
	p.opts.Metrics.Ingest(ctx, d.outcome)
	if int(d.outcome) < len(p.counts) {
		p.counts[d.outcome].Add(1)
	}
	level := slog.LevelInfo
	if d.status >= 500 {
		level = slog.LevelWarn
	}
	if !p.log.Enabled(ctx, level) {
		return
	}
	// The record goes straight to the handler, as slog's own methods would
	// send it, minus looking up the caller, which nothing prints.
	now := time.Now()
	rec := slog.NewRecord(now, level, "ingest", 0)
	label := d.label
	if label == "" {
		label = d.outcome.String()
	}
	// The attributes go in with one AddAttrs: a Record keeps five inline
	// and allocates the rest once, where each later call would grow it.
	var attrs [13]slog.Attr
	a := append(attrs[:0],
		slog.String("decision", label),
		slog.Int("status", d.status),
		slog.String("method", r.Method),
		slog.String("host", host),
		slog.Int("bytes", size),
		slog.Int64("duration_us", now.Sub(start).Microseconds()),
		slog.String("remote", r.RemoteAddr),
	)
	if d.id != "" {
		a = append(a, slog.String("id", d.id))
	}
	if d.route != "" {
		a = append(a, slog.String("route", d.route))
	}
	if d.rule != "" {
		a = append(a, slog.String("webhook_rule", d.rule))
	}
	if d.reason != "" {
		a = append(a, slog.String("reason", d.reason))
	}
	if ra := d.header["Retry-After"]; len(ra) > 0 {
		a = append(a, slog.String("retry_after", ra[0]))
	}
	if from := r.Header[handoff.Header]; len(from) > 0 {
		a = append(a, slog.String("handoff_from", from[0]))
	}
	rec.AddAttrs(a...)
	_ = p.log.Handler().Handle(ctx, rec)
}

package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/elazarl/goproxy"
	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/egress"
	"github.com/hookpace/hookpace/spool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Ingest outcomes, as counted in hookpace_ingest_requests_total.
const (
	outcomeAccepted     = "accepted"
	outcomeBackpressure = "rejected_backpressure"
	outcomeTooLarge     = "too_large"
	outcomeRefused      = "refused"
	outcomePassthrough  = "passthrough"
	outcomeBadRequest   = "bad_request"
	outcomeUnauthorized = "unauthorized"
	outcomeError        = "error"
)

// decision is one ingest decision: the answer and the canonical log line.
type decision struct {
	outcome string
	status  int
	reason  string
	header  http.Header
	id      string
}

func (p *Proxy) onRequest(r *http.Request, ctx *goproxy.ProxyCtx) (*http.Request, *http.Response) {
	start := time.Now()
	cfg := p.cfg()
	authorized := p.authorize(r, ctx, cfg)
	if authorized && r.Method != http.MethodPost {
		// Passthrough: forwarded synchronously, unspooled. The transport's
		// dialer applies the egress policy.
		if err := CheckTarget(r.URL); err != nil {
			host := HostKey(r.URL)
			d := decision{outcome: outcomeBadRequest, status: http.StatusBadRequest, reason: err.Error()}
			p.record(r, start, host, 0, d)
			return nil, d.response(r, host)
		}
		p.opts.Metrics.Ingest(r.Context(), outcomePassthrough)
		p.log.Info("ingest", "decision", outcomePassthrough, "method", r.Method, "host", HostKey(r.URL), "remote", r.RemoteAddr)
		return r, nil
	}
	// POSTs reach here from inside a MITM'd tunnel; plain ones take
	// serveIngest without goproxy.
	host, size, d := p.handle(r, cfg, authorized)
	p.record(r, start, host, size, d)
	return nil, d.response(r, host)
}

// serveIngest handles an absolute-form POST (what HTTP_PROXY clients send)
// directly, without goproxy's per-request machinery: this is the hot path.
func (p *Proxy) serveIngest(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	cfg := p.cfg()
	host, size, d := p.handle(r, cfg, p.authorize(r, nil, cfg))
	p.record(r, start, host, size, d)
	h := w.Header()
	for k, vs := range d.header {
		h[k] = vs
	}
	if d.status == http.StatusAccepted {
		h["Content-Type"] = []string{"application/json"}
		h["X-Hookpace-Id"] = []string{d.id}
		w.WriteHeader(d.status)
		w.Write(acceptedBody(d.id, host))
		return
	}
	h["Content-Type"] = []string{"text/plain; charset=utf-8"}
	w.WriteHeader(d.status)
	w.Write([]byte("hookpace: " + d.reason + "\n"))
}

// handle makes the ingest decision for one POST.
func (p *Proxy) handle(r *http.Request, cfg *config.Config, authorized bool) (host string, size int, d decision) {
	if !authorized {
		return "", 0, decision{outcome: outcomeUnauthorized, status: http.StatusProxyAuthRequired,
			reason: "proxy authentication required", header: http.Header{"Proxy-Authenticate": {`Basic realm="hookpace"`}}}
	}
	host = HostKey(r.URL)
	if !p.opts.Tracing {
		// The app's traceparent is stored with the other headers and
		// carried to the partner unchanged.
		d, size = p.decide(r.Context(), r, cfg, host)
		return host, size, d
	}
	ctx := p.opts.Prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := p.opts.Tracer.Start(ctx, "hookpace.ingest", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("hookpace.host", host), attribute.String("http.request.method", r.Method)))
	d, size = p.decide(ctx, r, cfg, host)
	span.SetAttributes(attribute.String("hookpace.outcome", d.outcome), attribute.Int("http.response.status_code", d.status))
	if d.status >= 400 {
		span.SetStatus(codes.Error, d.reason)
	}
	span.End()
	return host, size, d
}

func (p *Proxy) decide(ctx context.Context, r *http.Request, cfg *config.Config, host string) (decision, int) {
	if err := CheckTarget(r.URL); err != nil {
		return decision{outcome: outcomeBadRequest, status: http.StatusBadRequest, reason: err.Error()}, 0
	}
	_, hc := cfg.Lookup(host)
	// Refuse forbidden destinations before storing anything: a webhook
	// that could never be delivered must not get a 202.
	if err := p.verdicts.check(ctx, r.URL.Hostname(), destPort(r.URL), egress.IsDenied); err != nil {
		var denied *egress.DeniedError
		if errors.As(err, &denied) {
			return decision{outcome: outcomeRefused, status: http.StatusForbidden, reason: denied.Error()}, 0
		}
		// A DNS failure may be passing: spool it and let delivery retry.
		p.log.Debug("ingest: destination does not resolve now", "host", host, "error", err)
	}
	if full := p.opts.Spool.Full(); full != nil {
		return p.full(full), 0
	}
	maxBody := int64(cfg.Spool.MaxBody)
	if r.ContentLength > maxBody {
		return tooLarge(r.ContentLength, maxBody), 0
	}
	header := storedHeader(r.Header)
	if p.opts.Tracing {
		// The stored trace context is the ingest span's, so that the
		// delivery span continues the app's trace across the spool.
		p.opts.Prop.Inject(ctx, propagation.HeaderCarrier(header))
	}
	m := &spool.Message{
		Host:     host,
		Method:   r.Method,
		URL:      r.URL.String(),
		Header:   header,
		Enqueued: time.Now(),
	}
	if err := readBody(r, m, maxBody); err != nil {
		if errors.Is(err, errTooLarge) {
			return tooLarge(-1, maxBody), 0
		}
		return decision{outcome: outcomeBadRequest, status: http.StatusBadRequest, reason: "reading body: " + err.Error()}, 0
	}
	err := p.opts.Spool.Append(ctx, m, hc.MaxQueued)
	var full *spool.FullError
	var werr *spool.WriteError
	switch {
	case err == nil:
		return decision{outcome: outcomeAccepted, status: http.StatusAccepted, id: spool.IDString(m.ID)}, len(m.Body)
	case errors.As(err, &full):
		return p.full(full), len(m.Body)
	case errors.As(err, &werr), errors.Is(err, spool.ErrClosed):
		return decision{outcome: outcomeError, status: http.StatusServiceUnavailable, reason: "not stored: " + err.Error(),
			header: http.Header{"Retry-After": {"5"}}}, len(m.Body)
	default:
		return decision{outcome: outcomeError, status: http.StatusServiceUnavailable, reason: "not stored: " + err.Error()}, len(m.Body)
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

func tooLarge(n, limit int64) decision {
	reason := fmt.Sprintf("body exceeds spool.max_body (%d bytes)", limit)
	if n > 0 {
		reason = fmt.Sprintf("body of %d bytes exceeds spool.max_body (%d bytes)", n, limit)
	}
	return decision{outcome: outcomeTooLarge, status: http.StatusRequestEntityTooLarge, reason: reason}
}

// full is the backpressure answer: 429 with a Retry-After estimated from the
// spool's drain rate or, for a host at its max_queued, from that host's
// pacing.
func (p *Proxy) full(e *spool.FullError) decision {
	reason := "spool past its high-water mark; retry later"
	ra := e.RetryAfter
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
			return min(max(d, spool.MinRetryAfter), spool.MaxRetryAfter)
		}
	}
	return spool.UnknownRetryAfter
}

// record writes the decision's canonical log line and metric.
func (p *Proxy) record(r *http.Request, start time.Time, host string, size int, d decision) {
	ctx := r.Context()
	p.opts.Metrics.Ingest(ctx, d.outcome)
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
	rec.AddAttrs(
		slog.String("decision", d.outcome),
		slog.Int("status", d.status),
		slog.String("method", r.Method),
		slog.String("host", host),
		slog.Int("bytes", size),
		slog.Int64("duration_us", now.Sub(start).Microseconds()),
		slog.String("remote", r.RemoteAddr),
	)
	if d.id != "" {
		rec.AddAttrs(slog.String("id", d.id))
	}
	if d.reason != "" {
		rec.AddAttrs(slog.String("reason", d.reason))
	}
	if ra := d.header["Retry-After"]; len(ra) > 0 {
		rec.AddAttrs(slog.String("retry_after", ra[0]))
	}
	_ = p.log.Handler().Handle(ctx, rec)
}

// response is the decision as goproxy's answer.
func (d decision) response(r *http.Request, host string) *http.Response {
	var resp *http.Response
	if d.status == http.StatusAccepted {
		resp = goproxy.NewResponse(r, "application/json", d.status, string(acceptedBody(d.id, host)))
		resp.Header.Set("X-Hookpace-Id", d.id)
	} else {
		resp = goproxy.NewResponse(r, "text/plain; charset=utf-8", d.status, "hookpace: "+d.reason+"\n")
	}
	resp.Status = strconv.Itoa(d.status) + " " + http.StatusText(d.status)
	for k, vs := range d.header {
		resp.Header[k] = vs
	}
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

// onConnect applies the per-host CONNECT policy.
func (p *Proxy) onConnect(target string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
	start := time.Now()
	cfg := p.cfg()
	r := ctx.Req
	reject := func(d decision) (*goproxy.ConnectAction, string) {
		p.record(r, start, target, 0, d)
		ctx.Resp = d.response(r, target)
		return &goproxy.ConnectAction{Action: goproxy.ConnectReject}, target
	}
	if !p.authorize(r, ctx, cfg) {
		return reject(decision{outcome: outcomeUnauthorized, status: http.StatusProxyAuthRequired,
			reason: "proxy authentication required", header: http.Header{"Proxy-Authenticate": {`Basic realm="hookpace"`}}})
	}
	ctx.UserData = &ctxInfo{authorized: true}
	u := &url.URL{Scheme: "https", Host: target}
	if err := CheckTarget(u); err != nil {
		return reject(decision{outcome: outcomeBadRequest, status: http.StatusBadRequest, reason: err.Error()})
	}
	host := HostKey(u)
	_, hc := cfg.Lookup(host)
	switch hc.Connect {
	case config.ConnectMITM:
		if p.opts.CA == nil {
			return reject(decision{outcome: outcomeRefused, status: http.StatusForbidden,
				reason: "CONNECT to " + host + " wants mitm, but no mitm CA is configured (hookpace ca init, then mitm.ca_cert/ca_key)"})
		}
		p.log.Debug("connect", "decision", "mitm", "host", host, "remote", r.RemoteAddr)
		return &goproxy.ConnectAction{Action: goproxy.ConnectMitm, TLSConfig: func(h string, _ *goproxy.ProxyCtx) (*tls.Config, error) {
			return p.opts.CA.TLSConfig(h)
		}}, target
	case config.ConnectTunnel:
		if _, err := p.opts.Guard.CheckPort(r.Context(), u.Hostname(), destPort(u)); err != nil && egress.IsDenied(err) {
			return reject(decision{outcome: outcomeRefused, status: http.StatusForbidden, reason: err.Error()})
		}
		p.opts.Metrics.Ingest(r.Context(), outcomePassthrough)
		p.log.Info("ingest", "decision", "tunnel", "method", r.Method, "host", host, "remote", r.RemoteAddr,
			"reason", "connect: tunnel passes bytes through unthrottled")
		return &goproxy.ConnectAction{Action: goproxy.ConnectAccept}, target
	default:
		return reject(decision{outcome: outcomeRefused, status: http.StatusForbidden,
			reason: "CONNECT to " + host + " denied: hookpace cannot spool or pace an encrypted tunnel. " +
				"Either POST the http:// URL and set upgrade_tls: true for this host, or create a CA with " +
				"'hookpace ca init', set mitm.ca_cert and mitm.ca_key, and trust the CA in the app"})
	}
}

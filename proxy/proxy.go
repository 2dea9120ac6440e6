// Package proxy is hookpace's front door: an HTTP forward proxy (goproxy)
// that spools absolute-form POSTs and answers 202 once they are durable,
// passes other methods through to their targets, and applies the CONNECT
// policy (MITM with the operator's CA, tunnel or deny) to HTTPS.
package proxy

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/elazarl/goproxy"
	"github.com/hookpace/hookpace/egress"
	"github.com/hookpace/hookpace/handoff"
	"github.com/hookpace/hookpace/mitm"
	"github.com/hookpace/hookpace/spool"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Spooler is where accepted webhooks go; *spool.Spool is the real one.
type Spooler interface {
	Append(ctx context.Context, m *spool.Message, hostLimit int64) error
	// AppendKeys is Append for a webhook with an idempotency or coalesce
	// key (see dedupe.go).
	AppendKeys(ctx context.Context, m *spool.Message, hostLimit int64, k spool.Keys) (spool.Appended, error)
	Full() *spool.FullError // nil while new webhooks are admitted
	// KeyQueued returns the webhooks queued for key at host over all
	// priorities, and how many fairness keys have webhooks queued there
	// (fairness.max_queued_per_key, lanes.go).
	KeyQueued(host, key string) (queued, keys int)
}

var _ Spooler = (*spool.Spool)(nil)

// Guard decides which destinations may be reached; *egress.Guard is the
// real one.
type Guard interface {
	CheckPort(ctx context.Context, host string, port uint16) ([]netip.Addr, error)
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// Pacing estimates how soon a host's queue drains; *deliver.Dispatcher is
// the real one.
type Pacing interface {
	DrainTime(host string, n int64, now time.Time) (time.Duration, bool)
}

// Counter records ingest outcomes, deduplicated, coalesced and rewritten
// webhooks by host, and CONNECTs by host and mode; *telemetry.Metrics is the real one.
type Counter interface {
	Ingest(ctx context.Context, outcome Outcome)
	Deduplicated(ctx context.Context, host string)
	Coalesced(ctx context.Context, host string)
	// Tunnel counts a CONNECT or captured connection; reason is a
	// Splice* label for a captured connection spliced, else "".
	Tunnel(ctx context.Context, host, mode, reason string)
	// Rewritten counts a webhook for host whose body rewrite rules
	// changed, with the values dropped and masked.
	Rewritten(ctx context.Context, host string, dropped, masked int)
	// Forwarded counts a request to host that no webhooks rule made a webhook.
	Forwarded(ctx context.Context, host string)
}

// Options configure a Proxy.
type Options struct {
	Policy Policy // what the config says; a reload calls SetPolicy
	Spool  Spooler
	Pacing Pacing // nil: a host at max_queued gets unknownRetryAfter
	Guard  Guard
	CA     *mitm.CA // nil: MITM is not available (until SetCA)
	// Transport carries passthrough requests (non-POST) and tunnels. It
	// must not read proxy settings from the environment.
	Transport *http.Transport
	Logger    *slog.Logger
	Metrics   Counter
	Tracer    trace.Tracer
	Prop      propagation.TextMapPropagator
	// Tracing says spans are exported. When false, ingest starts no span
	// and the app's traceparent travels with the stored headers unchanged.
	Tracing bool
	// Door wraps the handler of each request at the proxy's door (the
	// metrics' http.server.request.duration); nil: none.
	Door func(http.Handler) http.Handler
	// HostStates applies the pauses and holds that hand-offs carry
	// (handoff.go); nil: a hand-off that carries one is not stored (503),
	// so that it stays with the hookpace that knows the state.
	HostStates HostStates
}

// Proxy is an http.Handler for the proxy listener.
type Proxy struct {
	stopping atomic.Pointer[decision] // set by Stopping: the answer every new webhook gets
	opts     Options
	gp       *goproxy.ProxyHttpServer
	door     http.Handler // serve, wrapped by Options.Door
	log      *slog.Logger
	verdicts *egress.Verdicts // at ingest: delivery asks again when it dials
	policy   atomic.Pointer[Policy]
	noticed  noticed // hosts whose webhook-like passthrough was logged
	ca       atomic.Pointer[mitm.CA]
	tunnels  tunnelBook
	counts   [NumOutcomes]atomic.Int64
	live     liveTunnels // the tunnels being spliced through now
	// forwarded counts the requests that were not webhooks, by host.
	forwarded forwardBook
	// unchecked logs, once, that hand-off claims are ignored for want
	// of a secret to check them with (see handoffOrigin).
	unchecked sync.Once
	batches   batches      // hand-off batches being received (handoff_batch.go)
	probes    probes       // what captured servers want (peek.go)
	loops     atomic.Int64 // own connections captured back and refused (loop.go)
}

// Counts reports how many requests had each ingest outcome since the
// proxy was built, by the outcome's name (those with none are left out).
func (p *Proxy) Counts() map[string]int64 {
	m := map[string]int64{}
	for i := range p.counts {
		if n := p.counts[i].Load(); n > 0 {
			m[Outcome(i).String()] = n
		}
	}
	return m
}

// passStart carries a passthrough request's start to its ingest line, in
// its ProxyCtx's UserData.
type passStart time.Time

type nopCounter struct{}

func (nopCounter) Ingest(context.Context, Outcome)                {}
func (nopCounter) Deduplicated(context.Context, string)           {}
func (nopCounter) Coalesced(context.Context, string)              {}
func (nopCounter) Tunnel(context.Context, string, string, string) {}
func (nopCounter) Rewritten(context.Context, string, int, int)    {}
func (nopCounter) Forwarded(context.Context, string)              {}

// New builds the proxy. goproxy's defaults are all replaced: its transport
// skips TLS verification and reads HTTP_PROXY, its CONNECT dialer reads
// HTTPS_PROXY, and its MITM CA is public.
func New(opts Options) *Proxy {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Metrics == nil {
		opts.Metrics = nopCounter{}
	}
	if opts.Tracer == nil {
		opts.Tracer = noop.NewTracerProvider().Tracer("")
	}
	if opts.Prop == nil {
		opts.Prop = propagation.TraceContext{}
	}
	// Every connection the proxy dials is known as hookpace's own, so
	// that a capture loop is seen (loop.go).
	opts.Guard = newOwnGuard(opts.Guard)
	p := &Proxy{opts: opts, log: opts.Logger, verdicts: egress.NewVerdicts(5*time.Second, 10000)}
	p.door = http.HandlerFunc(p.serve)
	if opts.Door != nil {
		p.door = opts.Door(p.door)
	}
	p.policy.Store(&opts.Policy)
	p.ca.Store(opts.CA)
	gp := goproxy.NewProxyHttpServer()
	gp.Logger = goproxyLogger{opts.Logger}
	gp.Tr = opts.Transport
	gp.ConnectDial = nil
	gp.ConnectDialWithReq = func(req *http.Request, network, addr string) (net.Conn, error) {
		return opts.Guard.DialContext(req.Context(), network, addr)
	}
	gp.NonproxyHandler = http.HandlerFunc(p.nonProxy)
	gp.OnRequest().DoFunc(p.onRequest)
	gp.OnRequest().HandleConnectFunc(p.onConnect)
	gp.OnResponse().DoFunc(p.onPassthroughResponse)
	p.gp = gp
	return p
}

// ServeHTTP takes absolute-form requests of the spooled methods (POST by
// default) itself and hands everything else (CONNECT, passthrough methods,
// origin-form requests) to goproxy. It serves the proxy listener and the
// requests inside tunnels alike (see framing.go).
// Every request but a CONNECT (whose handler's time is the tunnel's
// life) goes through Options.Door, once: at the listener, inside a
// tunnel, or captured.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.serve(w, r)
		return
	}
	p.door.ServeHTTP(w, r)
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	if why := judgeRequest(r); why != "" {
		host := r.Host
		if r.URL.IsAbs() {
			host = HostKey(r.URL)
		}
		p.record(r, time.Now(), host, 0, badRequest(why))
		refuseFraming(w, why)
		return
	}
	pol := p.policy.Load()
	w = closeAfterChunked(w, r)
	body := r.Body // net/http's own, before any wrapper
	withBodyDeadline(w, r, pol.BodyTimeout)
	if r.URL.IsAbs() {
		host := HostKey(r.URL)
		if rule, ok := pol.classifyAt(r, host); ok {
			p.serveIngest(w, r, body, host, rule)
			return
		}
	}
	if hj, ok := w.(http.Hijacker); ok && r.Method == http.MethodConnect && r.ProtoMajor == 1 {
		w = earlyWriter{ResponseWriter: w, hj: hj}
	}
	p.gp.ServeHTTP(w, r)
}

// SetPolicy applies a reloaded config: the new policy holds for every
// request from now on, cached egress verdicts are dropped, since the
// egress rules may have changed with it, and spliced tunnels to hosts it
// now intercepts are closed (endStale).
func (p *Proxy) SetPolicy(pol Policy) {
	p.policy.Store(&pol)
	p.verdicts.Reset()
	p.endStale()
}

// Stopping makes every new webhook get 503 with this Retry-After from now
// on (hookpace is shutting down: draining, handing off, closing its spool),
// before anything is read or stored. Passthrough requests still pass until
// the listener closes.
func (p *Proxy) Stopping(retryAfter time.Duration) {
	secs := max(1, int((retryAfter+time.Second-1)/time.Second))
	p.stopping.Store(&decision{outcome: outcomeStopping, status: http.StatusServiceUnavailable,
		reason: "hookpace is shutting down; retry later (elsewhere)",
		header: http.Header{"Retry-After": {strconv.Itoa(secs)}}})
}

// onPassthroughResponse writes a passthrough request's ingest line, and
// answers one the transport could not complete instead of goproxy's bare
// 500: 403 when egress policy refused the address at dial time, else 503
// (the destination can't be reached).
func (p *Proxy) onPassthroughResponse(resp *http.Response, ctx *goproxy.ProxyCtx) *http.Response {
	r := ctx.Req
	ps, ok := ctx.UserData.(passStart)
	if !ok {
		return resp // not a passthrough: its line is written already
	}
	start := time.Time(ps)
	host := HostKey(r.URL)
	size := int(max(r.ContentLength, 0))
	if resp != nil || ctx.Error == nil {
		d := decision{outcome: outcomePassthrough, reason: "method " + r.Method + " is not spooled: passed through"}
		if pol := p.policy.Load(); pol.spools(r.Method) {
			d.reason = "not a webhook (no webhooks rule matched): forwarded, the partner's answer returned"
		}
		p.opts.Metrics.Forwarded(r.Context(), host)
		p.forwarded.add(host, time.Now())
		if resp != nil {
			d.status = resp.StatusCode
		}
		p.record(r, start, host, size, d)
		return resp
	}
	d, refusedByPolicy := refused(ctx.Error)
	if !refusedByPolicy {
		d = decision{outcome: outcomeError, status: http.StatusServiceUnavailable,
			reason: "passthrough: cannot reach " + host + ": " + ctx.Error.Error()}
	}
	p.record(r, start, host, size, d)
	return d.response(r, host)
}

// nonProxy answers origin-form requests ("GET /path"): hookpace is a proxy
// and needs the absolute URL of the destination.
func (p *Proxy) nonProxy(w http.ResponseWriter, r *http.Request) {
	d := badRequest("this is an HTTP proxy; send requests with an absolute URL, " +
		"e.g. set HTTP_PROXY=http://" + p.policy.Load().Listen + " and POST to the webhook's real URL")
	p.record(r, time.Now(), r.Host, 0, d)
	body := d.answer(w.Header(), "")
	w.WriteHeader(d.status)
	w.Write(body)
}

// ctxInfo is carried from a CONNECT to the requests inside its tunnel.
type ctxInfo struct {
	authorized bool
	user       string // the proxy user it authenticated as
}

// authorize checks Proxy-Authorization when proxy auth is configured, and
// says which user the request authenticated as ("" without auth).
// Requests inside a MITM'd tunnel were authorized at the CONNECT.
func (p *Proxy) authorize(r *http.Request, ctx *goproxy.ProxyCtx, pol *Policy) (string, bool) {
	if len(pol.Users) == 0 || r.Context().Value(capturedKey{}) != nil {
		return "", true
	}
	if ctx != nil {
		if info, ok := ctx.UserData.(*ctxInfo); ok && info.authorized {
			return info.user, true
		}
	}
	user, pass, ok := parseBasic(r.Header.Get("Proxy-Authorization"))
	if !ok {
		return "", false
	}
	match := 0
	for _, u := range pol.Users {
		// Compare against every user, in constant time, so the answer's
		// timing says nothing about which part was wrong.
		uok := subtle.ConstantTimeCompare([]byte(user), []byte(u.Username))
		pok := subtle.ConstantTimeCompare([]byte(pass), []byte(u.Password))
		match |= uok & pok
	}
	if match != 1 {
		return "", false
	}
	return user, true
}

func parseBasic(h string) (user, pass string, ok bool) {
	const prefix = "Basic "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", "", false
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(h[len(prefix):]))
	if err != nil {
		return "", "", false
	}
	user, pass, ok = strings.Cut(string(b), ":")
	if !ok {
		return "", "", false
	}
	return user, pass, true
}

// hopHeaders are connection-level headers (RFC 9110 §7.6.1) that a proxy
// must not forward, plus two that a replay must not carry: Content-Length,
// which replay recomputes, and Expect, whose 100-continue was answered when
// the body was spooled (replayed, it makes every delivery to a server that
// ignores it wait a second before sending the body). And the hand-off's
// lineage header, which is between two hookpaces: the ingest line logs it,
// the partner gets what the app sent. And the lane headers (lanes.go).
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true, "Content-Length": true, "Expect": true,
	handoff.Header: true, handoff.SignatureHeader: true, handoff.BatchHeader: true, handoff.BatchSignatureHeader: true,
	// hookpace's own, read at ingest (lanes.go), never the partner's
	HeaderFairnessKey: true, HeaderOrderingKey: true, HeaderPriority: true, HeaderDelay: true, HeaderNotBefore: true,
}

// storedHeader returns the headers to replay: the request's headers less
// hop-by-hop ones, those named in Connection, and every Proxy-* header.
// The value slices are shared with h, which is not modified.
func storedHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vs := range h {
		if !hopHeaders[k] && !strings.HasPrefix(k, "Proxy-") {
			out[k] = vs
		}
	}
	for _, v := range h["Connection"] {
		for _, name := range strings.Split(v, ",") {
			out.Del(strings.TrimSpace(name))
		}
	}
	return out
}

type goproxyLogger struct{ log *slog.Logger }

func (l goproxyLogger) Printf(format string, v ...any) {
	l.log.Debug("goproxy: " + strings.TrimSpace(fmt.Sprintf(format, v...)))
}

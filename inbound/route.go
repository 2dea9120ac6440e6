package inbound

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/proxy"
	"github.com/hookpace/hookpace/webpath"
)

// HeaderReceivedAt carries to the app when the door received the webhook
// (RFC 3339, UTC, nanoseconds).
const HeaderReceivedAt = "Hookpace-Received-At"

// Ingester spools a verified webhook's copy for one target and says how
// to answer it; *proxy.Proxy is the real one.
type Ingester interface {
	TakeInbound(r *http.Request, in proxy.Inbound) proxy.Taken
}

// Counter counts requests refused at the door, by route and reason;
// *telemetry.Metrics is the real one.
type Counter interface {
	InboundRejected(ctx context.Context, route, reason string)
}

// Options configure a Route.
type Options struct {
	Route    config.InboundRoute
	Verifier *Verifier // nil: not verified
	Ingest   Ingester
	// App passes a request to the app synchronously (a reverse proxy
	// to Route.To).
	App     http.Handler
	Metrics Counter
	Logger  *slog.Logger
	MaxBody int64 // largest webhook body (spool.max_body)
	// BodyTimeout is how long a webhook's body may take to arrive
	// (proxy.body_timeout); 0: no limit here.
	BodyTimeout time.Duration
	Now         func() time.Time
	// Seen knows the delivery ids the route has taken (catch-up asks);
	// nil: none known.
	Seen Seer
}

// Route is the http.Handler of one inbound listener.
type Route struct {
	opts    Options
	base    *url.URL // the app's: where passthrough and sync requests go
	targets []target // where webhooks go, each its own copy
}

// NewRoute returns the handler for o.Route.
func NewRoute(o Options) (*Route, error) {
	u, err := url.Parse(o.Route.To)
	if err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	ts, err := newTargets(o.Route)
	if err != nil {
		return nil, err
	}
	return &Route{opts: o, base: u, targets: ts}, nil
}

// ServeHTTP judges r by the path the app will route (webpath) and sends
// it on with that path. On a webhook path (Paths, and what is below
// each), a POST is verified, spooled and answered once durable; GET,
// HEAD and OPTIONS, and what Passthrough names, go to the app as they
// are; any other method is refused with 405 before the app sees it on a
// route that verifies, unless a sync rule names it (verified, then
// passed to the app). Everything off the webhook paths goes to the app.
func (rt *Route) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := rt.opts.Now()
	dropFetched(r.Header)
	p, err := webpath.Normalize(r.URL.EscapedPath())
	if err != nil {
		rt.refuse(w, r, start, http.StatusBadRequest, "path", "request path: "+err.Error())
		return
	}
	proxy.SetPath(r.URL, p.Clean) // the app gets the path that was judged
	switch {
	case !rt.webhookPath(p):
		rt.passThrough(w, r, "not a webhook path")
		return
	case r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions:
		rt.passThrough(w, r, "not a webhook method")
		return
	case rt.passthroughPath(p):
		rt.passThrough(w, r, "passthrough")
		return
	case r.Method != http.MethodPost && rt.opts.Verifier == nil:
		rt.passThrough(w, r, "not a webhook method (the route verifies nothing)")
		return
	case r.Method != http.MethodPost && !rt.syncMethod(r.Method):
		rt.notAllowed(w, r, start)
		return
	}
	body, ok := rt.readBody(w, r, start)
	if !ok {
		return
	}
	if v := rt.opts.Verifier; v != nil {
		if rej := v.Verify(r.Header, body, start); rej != nil {
			rt.opts.Metrics.InboundRejected(r.Context(), rt.opts.Route.Name, rej.Reason)
			rt.refuse(w, r, start, http.StatusUnauthorized, rej.Reason, "signature "+rej.Error())
			return
		}
	}
	var doc map[string]json.RawMessage // parsed once, if a rule or the dedupe wants a field
	if rt.wantsJSON() {
		_ = json.Unmarshal(body, &doc) // not JSON: no field matches
	}
	if rt.syncRule(r, p, doc) {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		rt.passThrough(w, r, "sync rule")
		return
	}
	if r.Method != http.MethodPost {
		rt.notAllowed(w, r, start)
		return
	}
	in := proxy.Inbound{Route: rt.opts.Route.Name, Key: rt.deliveryID(r.Header, doc)}
	if a := rt.opts.Route.Answer; a.Status != 0 {
		in.Status, in.Body = a.Status, []byte(a.Body)
	}
	rt.fanOut(w, r, p, doc, body, in, start)
}

// readBody reads r's body whole, as strictly as the proxy's door: a
// declared length over MaxBody is a 413 before a byte is read, a body
// that has not arrived within BodyTimeout a 408; both close the
// connection. ok false: r is answered.
func (rt *Route) readBody(w http.ResponseWriter, r *http.Request, start time.Time) (body []byte, ok bool) {
	tooLarge := "body exceeds spool.max_body (" + strconv.FormatInt(rt.opts.MaxBody, 10) + " bytes)"
	if r.ContentLength > rt.opts.MaxBody {
		rt.tooLarge(w, r, start, tooLarge, 0)
		return nil, false
	}
	rc := http.NewResponseController(w)
	timed := rt.opts.BodyTimeout > 0 && rc.SetReadDeadline(rt.opts.Now().Add(rt.opts.BodyTimeout)) == nil
	body, err := io.ReadAll(io.LimitReader(r.Body, rt.opts.MaxBody+1))
	if timed {
		rc.SetReadDeadline(time.Time{})
	}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.Header().Set("Connection", "close")
		rt.refuse(w, r, start, http.StatusRequestTimeout, "body_timeout", "request body not received within proxy.body_timeout")
		return nil, false
	case err != nil:
		w.Header().Set("Connection", "close")
		rt.refuse(w, r, start, http.StatusBadRequest, "body", "reading body: "+err.Error())
		return nil, false
	case int64(len(body)) > rt.opts.MaxBody:
		rt.tooLarge(w, r, start, tooLarge, int64(len(body)))
		return nil, false
	}
	return body, true
}

// tooLarge answers 413 to a body over MaxBody of which n bytes were
// read, then reads and discards the rest (within bounds, see
// proxy.DrainRefusal) and closes the connection: a client that writes
// its whole body before reading reads the 413, not a reset.
func (rt *Route) tooLarge(w http.ResponseWriter, r *http.Request, start time.Time, reason string, n int64) {
	rt.logRefused(r, start, http.StatusRequestEntityTooLarge, "too_large", reason)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	proxy.DrainRefusal(w, r, http.StatusRequestEntityTooLarge, []byte("hookpace: "+reason+"\n"), n, rt.opts.MaxBody)
}

// notAllowed refuses a method the door does not take on a webhook path.
func (rt *Route) notAllowed(w http.ResponseWriter, r *http.Request, start time.Time) {
	w.Header().Set("Allow", "POST, GET, HEAD, OPTIONS")
	rt.refuse(w, r, start, http.StatusMethodNotAllowed, "method",
		"method "+strconv.Quote(r.Method)+" on a webhook path: webhooks are POSTs, verified at this door")
}

// appURL is a target's URL for a request to u: the target's base, then
// u's path and query.
func appURL(base, u *url.URL) *url.URL {
	out := *base
	out.Path = strings.TrimSuffix(base.Path, "/") + u.Path
	if u.RawPath != "" {
		out.RawPath = strings.TrimSuffix(base.EscapedPath(), "/") + u.RawPath
	}
	out.RawQuery = u.RawQuery
	return &out
}

// webhookPath reports whether p is one of the route's webhook paths or
// below one; every path when the route names none.
func (rt *Route) webhookPath(p webpath.Path) bool {
	if len(rt.opts.Route.Paths) == 0 {
		return true
	}
	for _, g := range rt.opts.Route.Paths {
		if p.Under(g) {
			return true
		}
	}
	return false
}

// passthroughPath reports whether a passthrough glob names p.
func (rt *Route) passthroughPath(p webpath.Path) bool {
	for _, g := range rt.opts.Route.Passthrough {
		if p.Match(g) {
			return true
		}
	}
	return false
}

// syncMethod reports whether a sync rule names method.
func (rt *Route) syncMethod(method string) bool {
	for _, s := range rt.opts.Route.Sync {
		if s.Method == method {
			return true
		}
	}
	return false
}

func (rt *Route) wantsJSON() bool {
	if rt.opts.Route.Dedupe.JSON != "" {
		return true
	}
	for _, s := range rt.opts.Route.Sync {
		if s.JSON != "" {
			return true
		}
	}
	for _, t := range rt.targets {
		if t.Filter != nil && t.Filter.JSON != "" {
			return true
		}
	}
	return false
}

// syncRule reports whether a rule names r (at path p, with JSON body doc)
// as one the app must answer itself.
func (rt *Route) syncRule(r *http.Request, p webpath.Path, doc map[string]json.RawMessage) bool {
	for _, s := range rt.opts.Route.Sync {
		if s.Method != "" && s.Method != r.Method {
			continue
		}
		if s.Path != "" && !p.Match(s.Path) {
			continue
		}
		if s.JSON != "" && jsonString(doc[s.JSON]) != s.Value {
			continue
		}
		return true
	}
	return false
}

// deliveryID is the provider's delivery id: the dedupe header, or the
// JSON field (a string or a number); "" when there is none.
func (rt *Route) deliveryID(h http.Header, doc map[string]json.RawMessage) string {
	d := rt.opts.Route.Dedupe
	if d.Header != "" {
		return h.Get(d.Header)
	}
	if d.JSON != "" {
		return jsonString(doc[d.JSON])
	}
	return ""
}

// jsonString is a JSON string's value, or a number's text; "" otherwise.
func jsonString(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// refuse answers a request the door will not take, with its canonical
// line. The reason never holds the secret.
func (rt *Route) refuse(w http.ResponseWriter, r *http.Request, start time.Time, status int, label, reason string) {
	rt.logRefused(r, start, status, label, reason)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, "hookpace: "+reason+"\n")
}

// logRefused writes the canonical line of a request the door refused.
func (rt *Route) logRefused(r *http.Request, start time.Time, status int, label, reason string) {
	rt.opts.Logger.LogAttrs(r.Context(), slog.LevelInfo, "inbound",
		slog.String("decision", "refused"), slog.String("route", rt.opts.Route.Name), slog.Int("status", status),
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("reason_code", label),
		slog.String("reason", reason), slog.Int64("duration_us", rt.opts.Now().Sub(start).Microseconds()),
		slog.String("remote", r.RemoteAddr))
}

// passThrough hands r to the app and writes its canonical line once the
// app has answered.
func (rt *Route) passThrough(w http.ResponseWriter, r *http.Request, why string) {
	start := rt.opts.Now()
	sw := &statusWriter{ResponseWriter: w}
	rt.opts.App.ServeHTTP(sw, r)
	rt.opts.Logger.LogAttrs(r.Context(), slog.LevelInfo, "inbound",
		slog.String("decision", "passthrough"), slog.String("route", rt.opts.Route.Name), slog.Int("status", sw.code()),
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("reason", why),
		slog.Int64("duration_us", rt.opts.Now().Sub(start).Microseconds()), slog.String("remote", r.RemoteAddr))
}

// statusWriter remembers the status the app answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Flush lets a streamed answer through as it comes.
func (s *statusWriter) Flush() {
	http.NewResponseController(s.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the writer underneath.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusWriter) code() int {
	if s.status == 0 {
		return http.StatusOK
	}
	return s.status
}

// NewApp returns the handler that passes requests to the app at to
// synchronously over rt: status, headers and a streamed body come back
// as the app sends them; an app that cannot be reached is a 502.
func NewApp(to string, rt http.RoundTripper, log *slog.Logger) (http.Handler, error) {
	u, err := url.Parse(to)
	if err != nil {
		return nil, err
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.SetXForwarded()
		},
		Transport:     rt,
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "hookpace: the app cannot be reached: "+err.Error()+"\n")
		},
	}, nil
}

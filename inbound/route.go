package inbound

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/proxy"
)

// HeaderReceivedAt carries to the app when the door received the webhook
// (RFC 3339, UTC, nanoseconds).
const HeaderReceivedAt = "Hookpace-Received-At"

// Ingester spools a verified webhook and answers it; *proxy.Proxy is the
// real one.
type Ingester interface {
	ServeInbound(w http.ResponseWriter, r *http.Request, in proxy.Inbound)
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
	Now     func() time.Time
}

// Route is the http.Handler of one inbound listener.
type Route struct {
	opts Options
	base *url.URL
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
	return &Route{opts: o, base: u}, nil
}

// ServeHTTP takes a POST to a webhook path in (verified, spooled, answered
// once durable) and passes everything else, and the handshakes the sync
// rules name, to the app.
func (rt *Route) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !rt.webhookPath(r.URL.Path) {
		rt.passThrough(w, r, "not a webhook path")
		return
	}
	start := rt.opts.Now()
	body, err := io.ReadAll(io.LimitReader(r.Body, rt.opts.MaxBody+1))
	switch {
	case err != nil:
		rt.refuse(w, r, start, http.StatusBadRequest, "body", "reading body: "+err.Error())
		return
	case int64(len(body)) > rt.opts.MaxBody:
		rt.refuse(w, r, start, http.StatusRequestEntityTooLarge, "too_large",
			"body exceeds spool.max_body ("+strconv.FormatInt(rt.opts.MaxBody, 10)+" bytes)")
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
	if rt.syncRule(r, doc) {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		rt.passThrough(w, r, "sync rule")
		return
	}
	in := proxy.Inbound{Route: rt.opts.Route.Name, Key: rt.deliveryID(r.Header, doc)}
	if a := rt.opts.Route.Answer; a.Status != 0 {
		in.Status, in.Body = a.Status, []byte(a.Body)
	}
	fwd := r.Clone(r.Context())
	fwd.URL = rt.appURL(r.URL)
	fwd.Host = fwd.URL.Host
	fwd.RequestURI = ""
	fwd.Body = io.NopCloser(bytes.NewReader(body))
	fwd.ContentLength = int64(len(body))
	fwd.Header.Set(HeaderReceivedAt, start.UTC().Format(time.RFC3339Nano))
	rt.opts.Ingest.ServeInbound(w, fwd, in)
}

// appURL is the app's URL for a request to u: the route's base, then u's
// path and query.
func (rt *Route) appURL(u *url.URL) *url.URL {
	out := *rt.base
	out.Path = strings.TrimSuffix(rt.base.Path, "/") + u.Path
	if u.RawPath != "" {
		out.RawPath = strings.TrimSuffix(rt.base.EscapedPath(), "/") + u.RawPath
	}
	out.RawQuery = u.RawQuery
	return &out
}

func (rt *Route) webhookPath(p string) bool {
	if len(rt.opts.Route.Paths) == 0 {
		return true
	}
	for _, g := range rt.opts.Route.Paths {
		if ok, _ := path.Match(g, p); ok {
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
	return false
}

// syncRule reports whether a rule names r (with JSON body doc) as one the
// app must answer itself.
func (rt *Route) syncRule(r *http.Request, doc map[string]json.RawMessage) bool {
	for _, s := range rt.opts.Route.Sync {
		if s.Method != "" && s.Method != r.Method {
			continue
		}
		if s.Path != "" {
			if ok, _ := path.Match(s.Path, r.URL.Path); !ok {
				continue
			}
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
	rt.opts.Logger.LogAttrs(r.Context(), slog.LevelInfo, "inbound",
		slog.String("decision", "refused"), slog.String("route", rt.opts.Route.Name), slog.Int("status", status),
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("reason_code", label),
		slog.String("reason", reason), slog.Int64("duration_us", rt.opts.Now().Sub(start).Microseconds()),
		slog.String("remote", r.RemoteAddr))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, "hookpace: "+reason+"\n")
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

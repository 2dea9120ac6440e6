package telemetry

import (
	"bufio"
	"maps"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// serverHandler records OpenTelemetry's http.server.request.duration for
// each request a listener of hookpace's answers: from when the handler
// gets it until the handler returns. Its attributes are bounded as the
// client's are (method, scheme, status code, error.type for a 5xx,
// protocol version; no address, route or host), each set built once.
type serverHandler struct {
	next     http.Handler
	scheme   string
	duration metric.Float64Histogram
	// sets is read without a lock or an allocation (a key boxed into a
	// sync.Map's any would be one a request); a new key copies it.
	sets   atomic.Pointer[map[serverKey]metric.MeasurementOption]
	setsMu sync.Mutex // held to add to sets
}

type serverKey struct {
	method, scheme, version string
	status                  int
}

// newServerDuration makes the server histogram, with the name, unit and
// duration buckets of the semantic conventions.
func newServerDuration(meter metric.Meter) (metric.Float64Histogram, error) {
	return meter.Float64Histogram("http.server.request.duration",
		metric.WithUnit("s"), metric.WithDescription("Duration of HTTP server requests."),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10))
}

// WrapServer instruments h, the handler of one of hookpace's listeners
// (an inbound route, the proxy's door) served over scheme ("http" or
// "https"), with the http.server.request.duration histogram. An empty
// scheme is each request's own: its URL's for an absolute-form request
// (the proxy's, and those read inside a tunnel), else "https" over TLS
// and "http" without. A request whose connection the handler hijacks
// (an upgrade) is not recorded: it has no answer to time.
func (t *Telemetry) WrapServer(h http.Handler, scheme string) http.Handler {
	return &serverHandler{next: h, scheme: scheme, duration: t.server}
}

func (s *serverHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	s.next.ServeHTTP(sw, r)
	if sw.hijacked {
		return
	}
	if sw.status == 0 {
		sw.status = http.StatusOK // nothing written: net/http answers 200
	}
	scheme := s.scheme
	switch {
	case scheme != "":
	case r.URL.IsAbs() && (r.URL.Scheme == "http" || r.URL.Scheme == "https"):
		scheme = r.URL.Scheme
	case r.TLS != nil:
		scheme = "https"
	default:
		scheme = "http"
	}
	_, version := netProtocol(r.Proto)
	s.duration.Record(r.Context(), time.Since(start).Seconds(),
		s.attributeSet(serverKey{method: standardMethod(r.Method), scheme: scheme, version: version, status: sw.status}))
}

func (s *serverHandler) attributeSet(k serverKey) metric.MeasurementOption {
	if m := s.sets.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(k.method),
		semconv.URLScheme(k.scheme),
		semconv.HTTPResponseStatusCode(k.status),
	}
	if k.version != "" {
		attrs = append(attrs, semconv.NetworkProtocolName("http"), semconv.NetworkProtocolVersion(k.version))
	}
	if k.status >= 500 {
		attrs = append(attrs, semconv.ErrorTypeKey.String(strconv.Itoa(k.status)))
	}
	s.setsMu.Lock()
	defer s.setsMu.Unlock()
	m := map[serverKey]metric.MeasurementOption{}
	if old := s.sets.Load(); old != nil {
		if v, ok := (*old)[k]; ok {
			return v
		}
		m = maps.Clone(*old)
	}
	v := metric.WithAttributeSet(attribute.NewSet(attrs...))
	m[k] = v
	s.sets.Store(&m)
	return v
}

// statusWriter notes the status a handler answers with.
type statusWriter struct {
	http.ResponseWriter
	status   int
	hijacked bool
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the writer underneath (Flush).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush and Hijack pass through to the writer underneath, for handlers
// that look for them on the writer itself (goproxy's upgrades).
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.hijacked = true
	}
	return c, rw, err
}

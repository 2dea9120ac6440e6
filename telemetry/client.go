package telemetry

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/egress"
	"github.com/hookpace/hookpace/spool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// clientTransport instruments every delivery attempt the way OpenTelemetry's
// HTTP semantic conventions describe a client request: a client span with
// the trace context injected into the request, and the
// http.client.request.duration and http.client.request.body.size
// histograms. It replaces otelhttp's Transport, which took ~16 % of the
// CPU of a replay, much of it building a new attribute set for every
// request, cloning every request and wrapping every body: here the metric
// attributes are bounded (no server.address and server.port, and no host:
// hookpace_delivery_latency_seconds is the per-host histogram, and two
// more per host cost a scrape some 35 lines a host), so each distinct set
// is built once and kept, and a request is copied only to carry a trace
// context.
type clientTransport struct {
	next   http.RoundTripper
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	clientInstruments
	sets sync.Map // clientKey -> metric.MeasurementOption
}

// clientInstruments are the client histograms, made once by Setup.
type clientInstruments struct {
	duration metric.Float64Histogram
	bodySize metric.Int64Histogram
}

// clientKey identifies one series of the client histograms.
type clientKey struct {
	method, scheme, proto, version, errType string
	status                                  int
}

// bodySizeBuckets (bytes) span a webhook's body, from a ping to the
// largest a partner takes.
var bodySizeBuckets = []float64{256, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20}

// newClientInstruments makes the client histograms, with the names, units
// and duration buckets of the semantic conventions (and of otelhttp).
func newClientInstruments(meter metric.Meter) (clientInstruments, error) {
	var c clientInstruments
	var err error
	c.duration, err = meter.Float64Histogram("http.client.request.duration",
		metric.WithUnit("s"), metric.WithDescription("Duration of HTTP client requests."),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10))
	if err != nil {
		return c, err
	}
	c.bodySize, err = meter.Int64Histogram("http.client.request.body.size",
		metric.WithUnit("By"), metric.WithDescription("Size of HTTP client request bodies."),
		metric.WithExplicitBucketBoundaries(bodySizeBuckets...))
	return c, err
}

func (c *clientTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	method := standardMethod(r.Method)
	ctx, span := c.tracer.Start(r.Context(), clientSpanName(method), trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(requestSpanAttrs(r, method)...)
		if n, ok := deliver.AttemptOf(r.Context()); ok && n > 1 {
			span.SetAttributes(semconv.HTTPRequestResendCount(n - 1))
		}
	}
	// The trace context goes to the destination whenever there is one:
	// with tracing off, that is the one the app sent, extracted upstream.
	if trace.SpanContextFromContext(ctx).IsValid() {
		r2 := r.WithContext(ctx)
		r2.Header = r.Header.Clone()
		if r2.Header == nil {
			r2.Header = http.Header{}
		}
		c.prop.Inject(ctx, propagation.HeaderCarrier(r2.Header))
		r = r2
	}

	resp, err := c.next.RoundTrip(r)

	k := clientKey{method: method, scheme: "http"}
	if r.URL != nil && r.URL.Scheme == "https" {
		k.scheme = "https"
	}
	proto := r.Proto
	if resp != nil && resp.Proto != "" {
		proto = resp.Proto
	}
	k.proto, k.version = netProtocol(proto)
	if resp != nil {
		k.status = resp.StatusCode
	} else if err != nil {
		k.errType = egress.ErrorClass(err)
	}
	set := c.attributeSet(k)
	c.duration.Record(ctx, time.Since(start).Seconds(), set)
	c.bodySize.Record(ctx, max(r.ContentLength, 0), set)

	if span.IsRecording() {
		switch {
		case err != nil:
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
			span.SetAttributes(semconv.ErrorTypeKey.String(k.errType))
		default:
			span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
			if k.version != "" {
				span.SetAttributes(semconv.NetworkProtocolVersion(k.version))
			}
			if resp.StatusCode >= 400 {
				span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(resp.StatusCode)))
				span.SetStatus(codes.Error, "")
			}
		}
	}
	return resp, err
}

// clientSpanName is a client span's name as the semantic conventions
// give it: the method, or HTTP for one outside the known set.
func clientSpanName(method string) string {
	if method == "_OTHER" {
		return "HTTP"
	}
	return method
}

// attributeSet returns the measurement option for k's series, built once.
func (c *clientTransport) attributeSet(k clientKey) metric.MeasurementOption {
	if v, ok := c.sets.Load(k); ok {
		return v.(metric.MeasurementOption)
	}
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(k.method),
		semconv.URLScheme(k.scheme),
	}
	if k.proto != "" {
		attrs = append(attrs, semconv.NetworkProtocolName(k.proto))
	}
	if k.version != "" {
		attrs = append(attrs, semconv.NetworkProtocolVersion(k.version))
	}
	if k.status > 0 {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(k.status))
	}
	if k.errType != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(k.errType))
	}
	v, _ := c.sets.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(attrs...)))
	return v.(metric.MeasurementOption)
}

// requestSpanAttrs are a client span's request attributes: method, the URL
// as every other view shows it (spool.RedactURL: query values, a password,
// a fragment and path secrets hidden), the server's address and port.
func requestSpanAttrs(r *http.Request, method string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(method)}
	if method == "_OTHER" {
		attrs = append(attrs, semconv.HTTPRequestMethodOriginal(r.Method))
	}
	if r.URL == nil {
		return attrs
	}
	u := *r.URL
	u.User = nil
	attrs = append(attrs, semconv.URLFull(spool.RedactURL(u.String())), semconv.ServerAddress(u.Hostname()))
	port, _ := strconv.Atoi(u.Port())
	if port == 0 {
		port = 80
		if u.Scheme == "https" {
			port = 443
		}
	}
	return append(attrs, semconv.ServerPort(port))
}

// standardMethod is the http.request.method value: a known method, or
// _OTHER (the semantic conventions keep the attribute's values bounded).
func standardMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch,
		http.MethodHead, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

// netProtocol splits "HTTP/1.1" into "http" and "1.1".
func netProtocol(proto string) (name, version string) {
	if proto == "HTTP/1.1" {
		return "http", "1.1" // nearly every answer: no lower-casing
	}
	name, version, _ = strings.Cut(proto, "/")
	return strings.ToLower(name), version
}

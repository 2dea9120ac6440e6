package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/hookpace/hookpace/proxy"
	"github.com/hookpace/hookpace/spool"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

const (
	incomingTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	incomingTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	incomingSpanID      = "00f067aa0ba902b7"
)

// extractIncoming returns the context a proxy handler would have after
// extracting the trace context of an incoming webhook request.
func extractIncoming(tel *Telemetry) context.Context {
	h := http.Header{}
	h.Set("traceparent", incomingTraceparent)
	return tel.Propagator.Extract(context.Background(), propagation.HeaderCarrier(h))
}

// traceparentReceiver is an httptest server recording the traceparent of
// every request it receives.
func traceparentReceiver(t *testing.T) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("traceparent"))
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

func post(t *testing.T, ctx context.Context, rt http.RoundTripper, url string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"event":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
}

func TestTracingContinuesIncomingTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel := newTelemetry(t, Options{SpanExporter: exp})
	srv, received := traceparentReceiver(t)

	ctx, span := tel.Tracer.Start(extractIncoming(tel), "ingest")
	post(t, ctx, tel.WrapTransport(srv.Client().Transport), srv.URL+"/hook")
	span.End()

	spans := exp.GetSpans()
	var ingest, deliver *tracetest.SpanStub
	for i := range spans {
		switch spans[i].Name {
		case "ingest":
			ingest = &spans[i]
		case "POST":
			deliver = &spans[i]
		}
	}
	if ingest == nil || deliver == nil {
		t.Fatalf("recorded spans %v, want ingest and POST", spans.Snapshots())
	}
	if got := ingest.SpanContext.TraceID().String(); got != incomingTraceID {
		t.Errorf("ingest span trace id %s, want %s", got, incomingTraceID)
	}
	if got := ingest.Parent.SpanID().String(); got != incomingSpanID {
		t.Errorf("ingest span parent %s, want %s", got, incomingSpanID)
	}
	if deliver.SpanKind != trace.SpanKindClient || deliver.Parent.SpanID() != ingest.SpanContext.SpanID() {
		t.Errorf("deliver span kind %v parent %s, want client span under ingest %s",
			deliver.SpanKind, deliver.Parent.SpanID(), ingest.SpanContext.SpanID())
	}

	got := received()
	want := "00-" + incomingTraceID + "-" + deliver.SpanContext.SpanID().String() + "-01"
	if len(got) != 1 || got[0] != want {
		t.Errorf("destination received traceparent %q, want [%s]", got, want)
	}
}

// With tracing off, the incoming traceparent still reaches the destination.
func TestPropagationWithTracingOff(t *testing.T) {
	tel := newTelemetry(t, Options{})
	srv, received := traceparentReceiver(t)

	ctx, span := tel.Tracer.Start(extractIncoming(tel), "ingest")
	if span.IsRecording() {
		t.Error("span records with tracing off")
	}
	post(t, ctx, tel.WrapTransport(srv.Client().Transport), srv.URL)
	span.End()

	if got := received(); len(got) != 1 || got[0] != incomingTraceparent {
		t.Errorf("destination received traceparent %q, want [%s]", got, incomingTraceparent)
	}
}

func TestSampleRatio(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel := newTelemetry(t, Options{SpanExporter: exp, SampleRatio: 1e-12})

	_, root := tel.Tracer.Start(context.Background(), "root")
	root.End()
	// A sampled parent is followed whatever the ratio.
	_, child := tel.Tracer.Start(extractIncoming(tel), "child")
	child.End()

	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != "child" {
		t.Errorf("recorded %v, want only child", spans.Snapshots())
	}
}

// OTLP endpoints given as a base URL get the signal path, and Shutdown
// flushes what is pending.
func TestOTLPExportOnShutdown(t *testing.T) {
	var mu sync.Mutex
	paths := map[string]int{}
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths[r.Method+" "+r.URL.Path]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()

	tel, err := Setup(context.Background(), Options{
		MetricsOTLPEndpoint: collector.URL,
		TraceExporter:       TraceExporterOTLP,
		TraceEndpoint:       collector.URL + "/",
	})
	if err != nil {
		t.Fatal(err)
	}
	tel.Metrics.Ingest(context.Background(), proxy.OutcomeAccepted)
	_, span := tel.Tracer.Start(context.Background(), "ingest")
	span.End()
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	if paths["POST /v1/metrics"] == 0 || paths["POST /v1/traces"] == 0 {
		t.Errorf("collector received %v, want POST /v1/metrics and POST /v1/traces", paths)
	}
}

func TestSetupErrors(t *testing.T) {
	for _, opts := range []Options{
		{TraceExporter: "jaeger"},
		{TraceExporter: TraceExporterOTLP, TraceEndpoint: "localhost:4318"},
		{MetricsOTLPEndpoint: "127.0.0.1:4318"},
		{MetricsOTLPEndpoint: "ftp://collector:4318"},
	} {
		if tel, err := Setup(context.Background(), opts); err == nil {
			_ = tel.Shutdown(context.Background())
			t.Errorf("Setup(%+v) succeeded, want an error", opts)
		}
	}
}

func TestOTLPURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/metrics"},
		{"http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/metrics"},
		{"https://collector.example/otlp/v1/metrics", "https://collector.example/otlp/v1/metrics"},
	} {
		got, err := otlpURL(tc.in, "/v1/metrics")
		if err != nil || got != tc.want {
			t.Errorf("otlpURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestStdoutExporter(t *testing.T) {
	var buf bytes.Buffer
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(newStdoutExporter(&buf)))
	defer func() { _ = tp.Shutdown(context.Background()) }()

	h := http.Header{}
	h.Set("traceparent", incomingTraceparent)
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(h))
	_, span := tp.Tracer("test").Start(ctx, "ingest", trace.WithSpanKind(trace.SpanKindServer))
	span.End()

	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("output %q: %v", buf.String(), err)
	}
	for key, want := range map[string]any{
		"name": "ingest", "kind": "server", "trace_id": incomingTraceID, "parent_span_id": incomingSpanID,
	} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v (output %s)", key, got[key], want, buf.String())
		}
	}
	if strings.Count(buf.String(), "\n") != 1 {
		t.Errorf("want one line per span, got %q", buf.String())
	}
}

// A client span's url.full shows the URL as every other view does: query
// values and path secrets hidden (spool.RedactURL).
func TestClientSpanURLRedacted(t *testing.T) {
	// Not parallel: the path rules are the process's.
	t.Cleanup(func() { _ = spool.SetRedactPaths(nil) })
	if err := spool.SetRedactPaths([]string{"127.0.0.1/services"}); err != nil {
		t.Fatal(err)
	}
	exp := tracetest.NewInMemoryExporter()
	tel := newTelemetry(t, Options{SpanExporter: exp})
	srv, received := traceparentReceiver(t)

	post(t, context.Background(), tel.WrapTransport(srv.Client().Transport), srv.URL+"/services/T1/B2/PATHSECRET?sig=QUERYSECRET&token=T0K")
	if len(received()) != 1 {
		t.Fatal("the destination got nothing")
	}
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("spans %v", spans.Snapshots())
	}
	var full string
	for _, kv := range spans[0].Attributes {
		if strings.Contains(kv.Value.String(), "SECRET") || strings.Contains(kv.Value.String(), "T0K") {
			t.Errorf("attribute %s = %q shows a secret", kv.Key, kv.Value.String())
		}
		if kv.Key == "url.full" {
			full = kv.Value.AsString()
		}
	}
	if want := srv.URL + "/services/REDACTED?sig=REDACTED&token=REDACTED"; full != want {
		t.Errorf("url.full %q, want %q", full, want)
	}
}

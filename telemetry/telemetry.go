// Package telemetry sets up hookpace's metrics (OpenTelemetry SDK, exposed
// in Prometheus text format and optionally pushed over OTLP/HTTP), tracing
// and W3C trace-context propagation, and its logging helpers.
//
// Setup sets no OpenTelemetry globals: every provider and the propagator are
// carried on *Telemetry and passed explicitly (WrapTransport does so), so
// several instances can coexist, as they do in tests. A main that also uses
// libraries relying on the globals can install them itself with
// otel.SetTextMapPropagator(t.Propagator) and
// otel.SetTracerProvider(t.TracerProvider).
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// instrumentationName names the meter and tracer of this module.
const instrumentationName = "github.com/hookpace/hookpace"

// Options configures Setup. The zero value gives Prometheus metrics only.
type Options struct {
	// MaxHostLabels caps the distinct host label values; later hosts are
	// reported as host="other". <= 0 means DefaultMaxHostLabels.
	MaxHostLabels int
	// MetricsOTLPEndpoint, if set, pushes metrics over OTLP/HTTP as well,
	// e.g. "http://127.0.0.1:4318" (a URL without a path gets /v1/metrics).
	MetricsOTLPEndpoint string
	// TraceExporter is "none" (the default when empty), "otlp" or "stdout"
	// (one JSON object per span and line on standard output).
	TraceExporter string
	// TraceEndpoint is the OTLP/HTTP endpoint for TraceExporter "otlp"
	// (a URL without a path gets /v1/traces); empty means the OTLP
	// environment variables or the exporter's default, localhost:4318.
	TraceEndpoint string
	// SampleRatio is the ratio of root traces sampled (parent-based); 0
	// means 1 when tracing is on.
	SampleRatio float64
	// SpanExporter, if set, is used instead of TraceExporter, synchronously
	// (for tests, e.g. tracetest.NewInMemoryExporter()).
	SpanExporter sdktrace.SpanExporter
	// ServiceName is the resource's service.name; default "hookpace".
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override it.
	ServiceName string
}

// tracing reports whether spans are exported.
func (o Options) tracing() bool {
	return o.SpanExporter != nil || (o.TraceExporter != "" && o.TraceExporter != TraceExporterNone)
}

// Telemetry holds the providers made by Setup.
type Telemetry struct {
	Metrics        *Metrics
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider // a noop provider when tracing is off
	Tracer         trace.Tracer
	// Propagator is W3C TraceContext + Baggage, always on, so an incoming
	// traceparent is carried to the destination even when tracing is off.
	Propagator propagation.TextMapPropagator

	tracing      bool
	client       clientInstruments
	server       metric.Float64Histogram // http.server.request.duration (server.go)
	handler      http.Handler
	shutdowns    []func(context.Context) error
	shutdownOnce sync.Once
	shutdownErr  error
}

// Setup builds the meter provider (Prometheus exporter on its own registry,
// plus OTLP push if configured), the tracer provider and the propagator.
// It sets no OpenTelemetry globals.
func Setup(ctx context.Context, opts Options) (_ *Telemetry, err error) {
	if opts.ServiceName == "" {
		opts.ServiceName = "hookpace"
	}
	if opts.MaxHostLabels <= 0 {
		opts.MaxHostLabels = DefaultMaxHostLabels
	}
	t := &Telemetry{
		Propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}
	defer func() {
		if err != nil {
			_ = t.Shutdown(ctx)
		}
	}()

	res, err := resource.New(ctx,
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(semconv.ServiceName(opts.ServiceName)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}

	mp, err := t.setupMetrics(ctx, opts, res)
	if err != nil {
		return nil, err
	}
	t.MeterProvider = mp
	if t.Metrics, err = newMetrics(mp.Meter(instrumentationName), opts.MaxHostLabels); err != nil {
		return nil, fmt.Errorf("telemetry metrics: %w", err)
	}
	if t.client, err = newClientInstruments(mp.Meter(instrumentationName)); err != nil {
		return nil, fmt.Errorf("telemetry metrics: %w", err)
	}
	if t.server, err = newServerDuration(mp.Meter(instrumentationName)); err != nil {
		return nil, fmt.Errorf("telemetry metrics: %w", err)
	}

	if t.TracerProvider, err = t.setupTracing(ctx, opts, res); err != nil {
		return nil, err
	}
	t.Tracer = t.TracerProvider.Tracer(instrumentationName)
	t.tracing = opts.tracing()
	return t, nil
}

// Tracing reports whether spans are exported: a caller that only needs a
// span to export it can skip starting one when this is false.
func (t *Telemetry) Tracing() bool { return t.tracing }

func (t *Telemetry) setupMetrics(ctx context.Context, opts Options, res *resource.Resource) (*sdkmetric.MeterProvider, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	exp, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
		otelprom.WithoutScopeInfo(),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry prometheus exporter: %w", err)
	}
	t.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      scrapeErrorLog{},
		ErrorHandling: promhttp.ContinueOnError,
	})

	mpOpts := []sdkmetric.Option{
		sdkmetric.WithResource(res),
		sdkmetric.WithReader(exp),
		sdkmetric.WithCardinalityLimit(cardinalityLimit(opts.MaxHostLabels)),
	}
	if !opts.tracing() && os.Getenv("OTEL_METRICS_EXEMPLAR_FILTER") == "" {
		// Exemplars point at hookpace's spans, and there are none: without
		// this, every histogram series keeps a reservoir all the same
		// (12.5 MB of heap with 1 000 hosts).
		mpOpts = append(mpOpts, sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter))
	}
	if opts.MetricsOTLPEndpoint != "" {
		u, err := otlpURL(opts.MetricsOTLPEndpoint, "/v1/metrics")
		if err != nil {
			return nil, fmt.Errorf("telemetry metrics OTLP endpoint: %w", err)
		}
		push, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(u))
		if err != nil {
			return nil, fmt.Errorf("telemetry metrics OTLP exporter: %w", err)
		}
		mpOpts = append(mpOpts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(push)))
	}
	mp := sdkmetric.NewMeterProvider(mpOpts...)
	t.shutdowns = append(t.shutdowns, mp.Shutdown)
	return mp, nil
}

// seriesPerHost bounds the attribute sets one host label has on any one
// instrument: a delivery outcome each (deliver.NumOutcomes), or a tunnel
// mode each.
const seriesPerHost = 8

// cardinalityLimit is the SDK's limit on one instrument's attribute sets
// for maxHosts host labels: above what hookpace's own cap lets through
// (every host label with every outcome, and "other"), so that the cap
// that applies is max_host_labels and never the SDK's (2,000 by default,
// beyond which it folds series into otel_metric_overflow="true").
func cardinalityLimit(maxHosts int) int {
	return (maxHosts+1)*seriesPerHost + 64
}

// scrapeErrorLog logs what promhttp could not collect through the slog
// default logger at the time of the scrape (main may replace it after Setup).
type scrapeErrorLog struct{}

func (scrapeErrorLog) Println(v ...any) {
	slog.Warn("metrics scrape", "err", strings.TrimSpace(fmt.Sprintln(v...)))
}

// otlpURL checks an OTLP/HTTP endpoint URL and gives it signalPath when it
// has no path, as the OTEL_EXPORTER_OTLP_ENDPOINT convention does.
func otlpURL(endpoint, signalPath string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q: want http(s)://host:port[/path]", endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = signalPath
	}
	return u.String(), nil
}

// Handler serves the metrics in Prometheus text format (mount it at GET
// /metrics). Besides hookpace's own series it has the go_* and process_*
// collectors and the OTel target_info series.
func (t *Telemetry) Handler() http.Handler { return t.handler }

// Shutdown flushes and stops the exporters. Calls after the first return
// the first call's result.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	t.shutdownOnce.Do(func() {
		var errs []error
		for i := len(t.shutdowns) - 1; i >= 0; i-- {
			if err := t.shutdowns[i](ctx); err != nil {
				errs = append(errs, err)
			}
		}
		if err := errors.Join(errs...); err != nil {
			t.shutdownErr = fmt.Errorf("telemetry shutdown: %w", err)
		}
	})
	return t.shutdownErr
}

// WrapTransport instruments rt (nil means http.DefaultTransport): each
// request gets a client span named by its method ("POST"), the trace
// context in its headers, and the http_client_request_duration_seconds and
// http_client_request_body_size_bytes histograms, without the server's
// address, port or host. The duration runs until the response's headers
// have arrived. See clientTransport.
func (t *Telemetry) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &clientTransport{
		next:              rt,
		tracer:            t.TracerProvider.Tracer(instrumentationName),
		prop:              t.Propagator,
		clientInstruments: t.client,
	}
}

package telemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Values of Options.TraceExporter.
const (
	TraceExporterNone   = "none"
	TraceExporterOTLP   = "otlp"
	TraceExporterStdout = "stdout"
)

func (t *Telemetry) setupTracing(ctx context.Context, opts Options, res *resource.Resource) (trace.TracerProvider, error) {
	var export sdktrace.TracerProviderOption
	switch {
	case opts.SpanExporter != nil:
		export = sdktrace.WithSyncer(opts.SpanExporter)
	case opts.TraceExporter == "" || opts.TraceExporter == TraceExporterNone:
		return noop.NewTracerProvider(), nil
	case opts.TraceExporter == TraceExporterStdout:
		export = sdktrace.WithSyncer(newStdoutExporter(os.Stdout))
	case opts.TraceExporter == TraceExporterOTLP:
		var expOpts []otlptracehttp.Option
		if opts.TraceEndpoint != "" {
			u, err := otlpURL(opts.TraceEndpoint, "/v1/traces")
			if err != nil {
				return nil, fmt.Errorf("telemetry trace endpoint: %w", err)
			}
			expOpts = append(expOpts, otlptracehttp.WithEndpointURL(u))
		}
		exp, err := otlptracehttp.New(ctx, expOpts...)
		if err != nil {
			return nil, fmt.Errorf("telemetry OTLP trace exporter: %w", err)
		}
		export = sdktrace.WithBatcher(exp)
	default:
		return nil, fmt.Errorf("telemetry: unknown trace exporter %q (want %s, %s or %s)",
			opts.TraceExporter, TraceExporterNone, TraceExporterOTLP, TraceExporterStdout)
	}

	ratio := opts.SampleRatio
	if ratio == 0 {
		ratio = 1
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
		export,
	)
	t.shutdowns = append(t.shutdowns, tp.Shutdown)
	return tp, nil
}

// stdoutExporter writes one JSON object per span and line: a debugging aid
// that reads well interleaved with JSON logs. (The upstream stdouttrace
// exporter would be one more module for the same purpose.)
type stdoutExporter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func newStdoutExporter(w io.Writer) *stdoutExporter {
	return &stdoutExporter{enc: json.NewEncoder(w)}
}

type stdoutSpan struct {
	Name       string         `json:"name"`
	Kind       string         `json:"kind"`
	TraceID    string         `json:"trace_id"`
	SpanID     string         `json:"span_id"`
	ParentID   string         `json:"parent_span_id,omitempty"`
	Start      time.Time      `json:"start"`
	DurationMS float64        `json:"duration_ms"`
	Status     string         `json:"status"`
	StatusMsg  string         `json:"status_message,omitempty"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

func (e *stdoutExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range spans {
		if err := ctx.Err(); err != nil {
			return err
		}
		out := stdoutSpan{
			Name:       s.Name(),
			Kind:       s.SpanKind().String(),
			TraceID:    s.SpanContext().TraceID().String(),
			SpanID:     s.SpanContext().SpanID().String(),
			Start:      s.StartTime(),
			DurationMS: float64(s.EndTime().Sub(s.StartTime())) / float64(time.Millisecond),
			Status:     s.Status().Code.String(),
			StatusMsg:  s.Status().Description,
		}
		if p := s.Parent(); p.IsValid() {
			out.ParentID = p.SpanID().String()
		}
		if attrs := s.Attributes(); len(attrs) > 0 {
			out.Attributes = make(map[string]any, len(attrs))
			for _, kv := range attrs {
				out.Attributes[string(kv.Key)] = kv.Value.AsInterface()
			}
		}
		if err := e.enc.Encode(out); err != nil {
			return fmt.Errorf("write span: %w", err)
		}
	}
	return nil
}

func (e *stdoutExporter) Shutdown(context.Context) error { return nil }

package deliver

import (
	"context"
	"net/http"

	"github.com/hookpace/hookpace/spool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// messagingSystem is messaging.system on the spans that show the spool
// as a queue: the PRODUCER span at ingest, a CONSUMER span per attempt.
const messagingSystem = "hookpace"

// startConsumer starts the CONSUMER span of one attempt to host of the
// webhooks ms (OpenTelemetry's messaging conventions: "process <host>").
// A single webhook's is a child of its stored trace context (the
// PRODUCER span at ingest, when tracing was on there) and linked to it,
// so that a trace shows the spool's wait as the gap between the two; a
// batch's runs under the dispatcher's context, linked to each member's.
func (d *Dispatcher) startConsumer(host, id string, ms []*spool.Message, batch bool) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKey.String(messagingSystem), semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("process"), semconv.MessagingDestinationName(host),
	}
	parent := d.ctx
	var links []trace.Link
	if batch {
		attrs = append(attrs, semconv.MessagingBatchMessageCount(len(ms)))
		for _, m := range ms {
			if sc := trace.SpanContextFromContext(d.traceParent(m.Header)); sc.IsValid() {
				links = append(links, trace.Link{SpanContext: sc})
			}
		}
	} else {
		attrs = append(attrs, semconv.MessagingMessageID(id))
		parent = d.traceParent(ms[0].Header)
		if sc := trace.SpanContextFromContext(parent); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	return d.opts.Tracer.Start(parent, "process "+host, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(links...), trace.WithAttributes(attrs...))
}

// spanPair is an attempt's hookpace.deliver span with its CONSUMER span
// around it: an error status and the end reach both, the inner first.
type spanPair struct {
	trace.Span // hookpace.deliver
	consumer   trace.Span
}

func (p spanPair) SetStatus(c codes.Code, description string) {
	p.Span.SetStatus(c, description)
	p.consumer.SetStatus(c, description)
}

func (p spanPair) End(opts ...trace.SpanEndOption) {
	p.Span.End(opts...)
	p.consumer.End(opts...)
}

// traceParent is the context an attempt of a webhook with header hdr runs
// under: the trace context the app sent, if hdr carries any of the fields
// the propagator reads. Most webhooks carry none, and then the
// propagator's parsing is skipped.
func (d *Dispatcher) traceParent(hdr http.Header) context.Context {
	for _, f := range d.propFields {
		if len(hdr[f]) > 0 {
			return d.opts.Prop.Extract(d.ctx, propagation.HeaderCarrier(hdr))
		}
	}
	return d.ctx
}

// canonicalFields are a propagator's header names as http.Header keys
// them.
func canonicalFields(p propagation.TextMapPropagator) []string {
	var out []string
	for _, f := range p.Fields() {
		out = append(out, http.CanonicalHeaderKey(f))
	}
	return out
}

// attemptKey carries an attempt's number (from 1) in its request's
// context, for the HTTP client's span (http.request.resend_count).
type attemptKey struct{}

// AttemptOf is the number (from 1) of the delivery attempt whose request
// has context ctx; ok is false for a request that is no attempt.
func AttemptOf(ctx context.Context) (n int, ok bool) {
	n, ok = ctx.Value(attemptKey{}).(int)
	return n, ok
}

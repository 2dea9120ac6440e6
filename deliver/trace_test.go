package deliver

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// A webhook's trace context is its parent whichever of the propagator's
// fields carries it, in whatever case the app wrote the header; a webhook
// with none runs under the dispatcher's own context.
func TestTraceParent(t *testing.T) {
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	d := &Dispatcher{opts: Options{Prop: prop}, propFields: canonicalFields(prop), ctx: context.Background()}
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traced := http.Header{}
	traced.Set("traceparent", tp)
	if sc := trace.SpanContextFromContext(d.traceParent(traced)); sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("trace id %s, want the traceparent's", sc.TraceID())
	}
	if ctx := d.traceParent(http.Header{"Content-Type": {"application/json"}}); ctx != d.ctx {
		t.Fatal("a webhook without trace headers got a context of its own")
	}
}

package deliver

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
)

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

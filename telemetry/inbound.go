package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// MetricInboundRejected counts requests an inbound route refused at the
// door for their signature, by route and reason (missing, malformed,
// stale, mismatch). Route names come from the config, so the label set
// is bounded.
const MetricInboundRejected = "hookpace_inbound_rejected_total"

func (m *Metrics) initInbound(meter metric.Meter) error {
	var err error
	if m.inboundRejected, err = meter.Int64Counter(MetricInboundRejected,
		metric.WithDescription("Requests an inbound route refused with 401 for their signature, by route and reason."),
		metric.WithUnit("{request}")); err != nil {
		return fmt.Errorf("create %s: %w", MetricInboundRejected, err)
	}
	return nil
}

// InboundRejected counts one request refused by route for reason.
func (m *Metrics) InboundRejected(ctx context.Context, route, reason string) {
	if m == nil {
		return
	}
	m.inboundRejected.Add(ctx, 1, metric.WithAttributes(attribute.String("route", route), attribute.String("reason", reason)))
}

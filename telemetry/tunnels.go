package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// MetricTunnels counts CONNECTs by destination host and what became of
// them, so that an operator can see which HTTPS destinations go
// around the pacing.
const MetricTunnels = "hookpace_tunnels_total"

// MetricForwarded counts the requests hookpace saw (absolute-form or
// inside an intercepted tunnel) and forwarded synchronously because no
// webhook rule matched them: API calls, answered by the partner itself.
const MetricForwarded = "hookpace_forwarded_total"

func (m *Metrics) initTunnels(meter metric.Meter) error {
	var err error
	if m.tunnels, err = meter.Int64Counter(MetricTunnels,
		metric.WithDescription("CONNECT tunnels by destination host and mode: intercepted (spooled and paced), passthrough (NOT paced) or refused; rejected counts, besides, the intercepted ones whose client refused hookpace's certificate."),
		metric.WithUnit("{tunnel}")); err != nil {
		return fmt.Errorf("create %s: %w", MetricTunnels, err)
	}
	if m.forwarded, err = meter.Int64Counter(MetricForwarded,
		metric.WithDescription("Requests forwarded synchronously to their destination host (not webhooks: no rule matched), the partner's answer returned."),
		metric.WithUnit("{request}")); err != nil {
		return fmt.Errorf("create %s: %w", MetricForwarded, err)
	}
	return nil
}

// Forwarded counts one request to host that was not a webhook and went to
// host synchronously.
func (m *Metrics) Forwarded(ctx context.Context, host string) {
	if m == nil {
		return
	}
	m.forwarded.Add(ctx, 1, metric.WithAttributes(attribute.String("host", m.HostLabel(host))))
}

// Tunnel counts one CONNECT or captured connection to host handled as
// mode (one of proxy's Tunnel* modes). reason, when set, is a short label
// of why a captured connection was spliced (proxy's Splice* labels), a
// label of its own on the series.
func (m *Metrics) Tunnel(ctx context.Context, host, mode, reason string) {
	if m == nil {
		return
	}
	if reason == "" {
		m.tunnels.Add(ctx, 1, metric.WithAttributes(attribute.String("host", m.HostLabel(host)), attribute.String("mode", mode)))
		return
	}
	m.tunnels.Add(ctx, 1, metric.WithAttributes(attribute.String("host", m.HostLabel(host)), attribute.String("mode", mode),
		attribute.String("reason", reason)))
}

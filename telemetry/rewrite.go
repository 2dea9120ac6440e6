package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/metric"
)

// Rewrite rules at ingest (rewrite.json).
const (
	MetricRewritten     = "hookpace_rewrite_webhooks_total"       // counter {host}: webhooks whose body a rule changed
	MetricRewriteDrop   = "hookpace_rewrite_dropped_fields_total" // counter {host}: values dropped
	MetricRewriteMasked = "hookpace_rewrite_masked_fields_total"  // counter {host}: values masked
)

type rewriteInstruments struct {
	webhooks, dropped, masked metric.Int64Counter
}

func (m *Metrics) initRewrite(meter metric.Meter) error {
	r := &m.rewrite
	for _, c := range []struct {
		dst        *metric.Int64Counter
		name, desc string
		unit       string
	}{
		{&r.webhooks, MetricRewritten, "Webhooks whose body the host's rewrite.json rules changed at ingest, by destination host.", "{request}"},
		{&r.dropped, MetricRewriteDrop, "Values the host's rewrite.json drop rules removed at ingest, by destination host.", "{field}"},
		{&r.masked, MetricRewriteMasked, "Values the host's rewrite.json mask rules masked at ingest, by destination host.", "{field}"},
	} {
		var err error
		if *c.dst, err = meter.Int64Counter(c.name, metric.WithDescription(c.desc), metric.WithUnit(c.unit)); err != nil {
			return fmt.Errorf("create %s: %w", c.name, err)
		}
	}
	return nil
}

// Rewritten counts one webhook for host whose body the rules changed,
// with the values they dropped and masked.
func (m *Metrics) Rewritten(ctx context.Context, host string, dropped, masked int) {
	if m == nil {
		return
	}
	attrs := m.entry(host).add
	m.rewrite.webhooks.Add(ctx, 1, attrs...)
	if dropped > 0 {
		m.rewrite.dropped.Add(ctx, int64(dropped), attrs...)
	}
	if masked > 0 {
		m.rewrite.masked.Add(ctx, int64(masked), attrs...)
	}
}

package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/metric"
)

// Idempotent enqueue and coalescing.
const (
	MetricDeduplicated = "hookpace_ingest_deduplicated_total" // counter {host}: answered with an earlier webhook's id
	MetricCoalesced    = "hookpace_ingest_coalesced_total"    // counter {host}: replaced a queued webhook
	MetricDedupeKeys   = "hookpace_dedupe_keys"               // gauge {}: idempotency keys remembered
	MetricDedupeBytes  = "hookpace_dedupe_bytes"              // gauge {}: their bytes
)

type dedupeInstruments struct {
	deduplicated metric.Int64Counter
	coalesced    metric.Int64Counter
	keys         metric.Int64ObservableGauge
	bytes        metric.Int64ObservableGauge
}

func (m *Metrics) initDedupe(meter metric.Meter) error {
	d := &m.dedupe
	var err error
	if d.deduplicated, err = meter.Int64Counter(MetricDeduplicated,
		metric.WithDescription("Webhooks answered with an earlier webhook's id (Idempotency-Key), by destination host."),
		metric.WithUnit("{request}")); err != nil {
		return fmt.Errorf("create %s: %w", MetricDeduplicated, err)
	}
	if d.coalesced, err = meter.Int64Counter(MetricCoalesced,
		metric.WithDescription("Webhooks that replaced a queued webhook's headers and body (Hookpace-Coalesce-Key), by destination host."),
		metric.WithUnit("{request}")); err != nil {
		return fmt.Errorf("create %s: %w", MetricCoalesced, err)
	}
	if d.keys, err = meter.Int64ObservableGauge(MetricDedupeKeys,
		metric.WithDescription("Idempotency keys the spool remembers."),
		metric.WithUnit("{key}")); err != nil {
		return fmt.Errorf("create %s: %w", MetricDedupeKeys, err)
	}
	if d.bytes, err = meter.Int64ObservableGauge(MetricDedupeBytes,
		metric.WithDescription("Bytes of the idempotency keys the spool remembers."),
		metric.WithUnit("By")); err != nil {
		return fmt.Errorf("create %s: %w", MetricDedupeBytes, err)
	}
	return nil // observed by Metrics.observe, from the one spool snapshot
}

// Deduplicated counts one webhook for host answered with an earlier one's id.
func (m *Metrics) Deduplicated(ctx context.Context, host string) {
	if m == nil {
		return
	}
	m.dedupe.deduplicated.Add(ctx, 1, m.entry(host).add...)
}

// Coalesced counts one webhook for host that replaced a queued one.
func (m *Metrics) Coalesced(ctx context.Context, host string) {
	if m == nil {
		return
	}
	m.dedupe.coalesced.Add(ctx, 1, m.entry(host).add...)
}

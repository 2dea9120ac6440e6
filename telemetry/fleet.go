package telemetry

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// fleetInstruments count fleet mode's Redis round trips and fallbacks.
type fleetInstruments struct {
	trips     metric.Int64Counter
	latency   metric.Float64Histogram
	fallbacks metric.Int64Counter
	ops       map[string]*fleetOpAttrs // built once: an attribute set per call costs
}

// fleetOpAttrs are the attribute options of one operation's round trips.
type fleetOpAttrs struct {
	ok, failed metric.AddOption
	latency    metric.RecordOption
}

func newFleetOpAttrs(op string) *fleetOpAttrs {
	return &fleetOpAttrs{
		ok:      metric.WithAttributeSet(attribute.NewSet(attribute.String("op", op), attribute.String("result", "ok"))),
		failed:  metric.WithAttributeSet(attribute.NewSet(attribute.String("op", op), attribute.String("result", "error"))),
		latency: metric.WithAttributeSet(attribute.NewSet(attribute.String("op", op))),
	}
}

var fleetLatencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}

func (m *Metrics) initFleet(meter metric.Meter) error {
	var err error
	if m.fleet.trips, err = meter.Int64Counter(MetricFleetRoundTrips,
		metric.WithDescription("Fleet mode: Redis round trips, by operation and result (ok or error)."),
		metric.WithUnit("{round_trip}")); err != nil {
		return fmt.Errorf("create %s: %w", MetricFleetRoundTrips, err)
	}
	if m.fleet.latency, err = meter.Float64Histogram(MetricFleetLatency,
		metric.WithDescription("Fleet mode: Redis round trip time, by operation."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(fleetLatencyBuckets...)); err != nil {
		return fmt.Errorf("create %s: %w", MetricFleetLatency, err)
	}
	if m.fleet.fallbacks, err = meter.Int64Counter(MetricFleetFallbacks,
		metric.WithDescription("Fleet mode: times this replica fell back to its local share because Redis did not answer."),
		metric.WithUnit("{fallback}")); err != nil {
		return fmt.Errorf("create %s: %w", MetricFleetFallbacks, err)
	}
	m.fleet.ops = map[string]*fleetOpAttrs{}
	for _, op := range []string{"ask", "renew", "heartbeat", "pause", "resume", "pause_state"} {
		m.fleet.ops[op] = newFleetOpAttrs(op)
	}
	return nil
}

// FleetRoundTrip records one Redis round trip of fleet mode.
func (m *Metrics) FleetRoundTrip(op string, d time.Duration, err error) {
	if m == nil {
		return
	}
	a := m.fleet.ops[op] // read-only after initFleet
	if a == nil {
		a = newFleetOpAttrs(op)
	}
	result := a.ok
	if err != nil {
		result = a.failed
	}
	ctx := context.Background()
	m.fleet.trips.Add(ctx, 1, result)
	m.fleet.latency.Record(ctx, d.Seconds(), a.latency)
}

// FleetFallback counts a fall back to the local share.
func (m *Metrics) FleetFallback() {
	if m == nil {
		return
	}
	m.fleet.fallbacks.Add(context.Background(), 1)
}

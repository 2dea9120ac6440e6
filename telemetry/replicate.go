package telemetry

import (
	"context"
	"fmt"
	"sync/atomic"

	"go.opentelemetry.io/otel/metric"
)

// Replication of the spool to NATS JetStream (spool.replicate).
const (
	MetricReplicationReachable = "hookpace_replication_reachable"      // gauge {}: 1 while the stream takes writes
	MetricReplicationLocalOnly = "hookpace_replication_local_only"     // gauge {}: webhooks acknowledged on the local spool alone
	MetricReplicationFailed    = "hookpace_replication_failed_rounds"  // gauge {}: publish rounds the stream did not take
	MetricReplicationAdopted   = "hookpace_replication_adopted"        // gauge {}: webhooks taken from adopted replicas' queues
	MetricReplicationLag       = "hookpace_replication_pending_delete" // gauge {}: deletes not yet answered by the stream
)

// ReplicationSnapshot is the replication's state at a scrape.
type ReplicationSnapshot struct {
	Reachable                       bool
	LocalOnly, Failed, Adopted, Lag int64
}

type replicationInstruments struct {
	fn atomic.Pointer[func() ReplicationSnapshot]
}

func (m *Metrics) initReplication(meter metric.Meter) error {
	names := []struct{ name, desc string }{
		{MetricReplicationReachable, "1 while the replicated spool's stream takes writes, else 0."},
		{MetricReplicationLocalOnly, "Webhooks acknowledged on the local spool alone (on_unavailable: local) since the start."},
		{MetricReplicationFailed, "Publish rounds the replicated spool's stream did not take since the start."},
		{MetricReplicationAdopted, "Webhooks taken from the queues of dead replicas since the start."},
		{MetricReplicationLag, "Deletes of delivered webhooks not yet answered by the stream."},
	}
	gauges := make([]metric.Int64ObservableGauge, len(names))
	insts := make([]metric.Observable, len(names))
	for i, n := range names {
		g, err := meter.Int64ObservableGauge(n.name, metric.WithDescription(n.desc))
		if err != nil {
			return fmt.Errorf("create %s: %w", n.name, err)
		}
		gauges[i], insts[i] = g, g
	}
	_, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		fn := m.replication.fn.Load()
		if fn == nil {
			return nil
		}
		s := (*fn)()
		reachable := int64(0)
		if s.Reachable {
			reachable = 1
		}
		for i, v := range []int64{reachable, s.LocalOnly, s.Failed, s.Adopted, s.Lag} {
			o.ObserveInt64(gauges[i], v)
		}
		return nil
	}, insts...)
	return err
}

// ObserveReplication has the replication gauges read fn at each scrape;
// without it they are not reported.
func (m *Metrics) ObserveReplication(fn func() ReplicationSnapshot) {
	if m == nil {
		return
	}
	m.replication.fn.Store(&fn)
}

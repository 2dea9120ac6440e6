package telemetry

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The gauges that the shipped alert rules and Grafana dashboard
// (deploy/) need beyond the spool and host gauges: the spool's limits,
// watermarks and admission state, readiness, dead letters, the age of the
// oldest queued message, and each host's breaker and pause.
const (
	MetricSpoolLimitMessages = "hookpace_spool_limit_messages"     // gauge {}: spool.max_messages
	MetricSpoolLimitBytes    = "hookpace_spool_limit_bytes"        // gauge {}: spool.max_bytes
	MetricSpoolWatermark     = "hookpace_spool_watermark"          // gauge {level=high|low}: fraction of either limit
	MetricSpoolUsage         = "hookpace_spool_usage"              // gauge {}: the larger of the two fractions in use
	MetricSpoolAccepting     = "hookpace_spool_accepting"          // gauge {}: 1 while new webhooks are admitted
	MetricSpoolRefusing      = "hookpace_spool_refusing"           // gauge {reason=high_water|disk_full|dir_gone}: 1 while refusing for it
	MetricReady              = "hookpace_ready"                    // gauge {}: 1 while /readyz answers 200
	MetricDeadLetters        = "hookpace_dead_letters"             // gauge {}: dead letters kept
	MetricHostDeadLetters    = "hookpace_host_dead_letters"        // gauge {host}: same, per host with any
	MetricSpoolOldestAge     = "hookpace_spool_oldest_age_seconds" // gauge {}: age of the oldest queued message, 0 if none
	MetricHostOldestAge      = "hookpace_host_oldest_age_seconds"  // gauge {host}: same, per host
	MetricHostBreakerOpen    = "hookpace_host_breaker_open"        // gauge {host}: 1 while the breaker is open or half-open
	MetricHostPaused         = "hookpace_host_paused"              // gauge {host}: 1 while paused by an operator
)

// Reasons of MetricSpoolRefusing.
const (
	RefusingHighWater = "high_water"
	RefusingDiskFull  = "disk_full"
	RefusingDirGone   = "dir_gone"
)

var refusingReasons = [...]string{RefusingHighWater, RefusingDiskFull, RefusingDirGone}

// StateSnapshot is the admission state at scrape time.
type StateSnapshot struct {
	MaxMessages, MaxBytes int64
	HighWater, LowWater   float64
	Usage                 float64
	Accepting             bool
	Refusing              string // one of the Refusing* reasons, or ""
	Ready                 bool
	DeadLetters           int64
	DeadByHost            map[string]int64 // hosts with dead letters
	OldestAge             float64          // seconds; 0 with nothing queued
	Hosts                 []HostState
}

// HostState is what the alerts need of one host.
type HostState struct {
	Host        string
	OldestAge   float64 // seconds; 0 with nothing queued
	BreakerOpen bool    // open or half-open
	Paused      bool
}

type stateInstruments struct {
	limitMessages, limitBytes, accepting, ready, dead metric.Int64ObservableGauge
	hostDead                                          metric.Int64ObservableGauge
	refusing, breaker, paused                         metric.Int64ObservableGauge
	watermark, usage, oldest, hostOldest              metric.Float64ObservableGauge

	high, low  []metric.ObserveOption
	refusingBy [len(refusingReasons)][]metric.ObserveOption
}

// initState creates the state gauges and their callback.
func (m *Metrics) initState(meter metric.Meter) error {
	s := &m.state
	ints := []struct {
		dst        *metric.Int64ObservableGauge
		name, desc string
		unit       string
	}{
		{&s.limitMessages, MetricSpoolLimitMessages, "The spool's message limit (spool.max_messages).", "{message}"},
		{&s.limitBytes, MetricSpoolLimitBytes, "The spool's byte limit (spool.max_bytes).", "By"},
		{&s.accepting, MetricSpoolAccepting, "1 while the spool admits new webhooks, else 0.", ""},
		{&s.refusing, MetricSpoolRefusing, "1 while the spool refuses new webhooks for this reason, else 0.", ""},
		{&s.ready, MetricReady, "1 while /readyz answers 200, else 0.", ""},
		{&s.dead, MetricDeadLetters, "Dead letters kept in the spool.", "{message}"},
		{&s.hostDead, MetricHostDeadLetters, "Dead letters kept in the spool for the host (hosts with none have no series).", "{message}"},
		{&s.breaker, MetricHostBreakerOpen, "1 while the host's circuit breaker is open or half-open, else 0.", ""},
		{&s.paused, MetricHostPaused, "1 while an operator has paused the host, else 0.", ""},
	}
	var err error
	var all []metric.Observable
	for _, g := range ints {
		opts := []metric.Int64ObservableGaugeOption{metric.WithDescription(g.desc)}
		if g.unit != "" {
			opts = append(opts, metric.WithUnit(g.unit))
		}
		if *g.dst, err = meter.Int64ObservableGauge(g.name, opts...); err != nil {
			return fmt.Errorf("create %s: %w", g.name, err)
		}
		all = append(all, *g.dst)
	}
	floats := []struct {
		dst        *metric.Float64ObservableGauge
		name, desc string
		unit       string
	}{
		{&s.watermark, MetricSpoolWatermark, "The spool's watermarks as fractions of either limit: it refuses above high and accepts again below low.", ""},
		{&s.usage, MetricSpoolUsage, "The larger of the fractions of the spool's message and byte limits in use.", ""},
		{&s.oldest, MetricSpoolOldestAge, "Age of the oldest queued message; 0 when nothing is queued.", "s"},
		{&s.hostOldest, MetricHostOldestAge, "Age of the host's oldest queued message; 0 when nothing is queued.", "s"},
	}
	for _, g := range floats {
		opts := []metric.Float64ObservableGaugeOption{metric.WithDescription(g.desc)}
		if g.unit != "" {
			opts = append(opts, metric.WithUnit(g.unit))
		}
		if *g.dst, err = meter.Float64ObservableGauge(g.name, opts...); err != nil {
			return fmt.Errorf("create %s: %w", g.name, err)
		}
		all = append(all, *g.dst)
	}
	s.high = []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("level", "high")))}
	s.low = []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("level", "low")))}
	for i, r := range refusingReasons {
		s.refusingBy[i] = []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r)))}
	}
	if _, err = meter.RegisterCallback(m.observeState, all...); err != nil {
		return fmt.Errorf("register state callback: %w", err)
	}
	return nil
}

// ObserveState registers the function that reports the admission state at
// scrape time, replacing any earlier one; nil removes it.
func (m *Metrics) ObserveState(fn func() StateSnapshot) {
	if m == nil {
		return
	}
	if fn == nil {
		m.stateFn.Store(nil)
		return
	}
	m.stateFn.Store(&fn)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func (m *Metrics) observeState(_ context.Context, o metric.Observer) error {
	fn := m.stateFn.Load()
	if fn == nil {
		return nil
	}
	st := (*fn)()
	s := &m.state
	o.ObserveInt64(s.limitMessages, st.MaxMessages)
	o.ObserveInt64(s.limitBytes, st.MaxBytes)
	o.ObserveFloat64(s.watermark, st.HighWater, s.high...)
	o.ObserveFloat64(s.watermark, st.LowWater, s.low...)
	o.ObserveFloat64(s.usage, st.Usage)
	o.ObserveInt64(s.accepting, b2i(st.Accepting))
	for i, r := range refusingReasons {
		o.ObserveInt64(s.refusing, b2i(st.Refusing == r), s.refusingBy[i]...)
	}
	o.ObserveInt64(s.ready, b2i(st.Ready))
	o.ObserveInt64(s.dead, st.DeadLetters)
	o.ObserveFloat64(s.oldest, st.OldestAge)

	// Hosts sharing a label (beyond the cap: "other") report the worst.
	type agg struct {
		oldest          float64
		breaker, paused int64
	}
	aggs := make(map[*hostEntry]*agg, len(st.Hosts))
	for _, h := range st.Hosts {
		e := m.entry(h.Host)
		a := aggs[e]
		if a == nil {
			a = &agg{}
			aggs[e] = a
		}
		a.oldest = max(a.oldest, h.OldestAge)
		a.breaker = max(a.breaker, b2i(h.BreakerOpen))
		a.paused = max(a.paused, b2i(h.Paused))
	}
	for e, a := range aggs {
		o.ObserveFloat64(s.hostOldest, a.oldest, e.observe...)
		o.ObserveInt64(s.breaker, a.breaker, e.observe...)
		o.ObserveInt64(s.paused, a.paused, e.observe...)
	}
	m.observeHostDead(o, st.DeadByHost)
	return nil
}

// observeHostDead reports the dead letters per host label; hosts sharing
// a label (beyond the cap: "other") are summed.
func (m *Metrics) observeHostDead(o metric.Observer, dead map[string]int64) {
	sums := make(map[*hostEntry]int64, len(dead))
	// In order, so that which hosts get a label of their own does not
	// depend on map order.
	for _, h := range slices.Sorted(maps.Keys(dead)) {
		sums[m.entry(h)] += dead[h]
	}
	for e, n := range sums {
		o.ObserveInt64(m.state.hostDead, n, e.observe...)
	}
}

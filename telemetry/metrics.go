package telemetry

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/proxy"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// DefaultMaxHostLabels applies when Options.MaxHostLabels <= 0. A scrape
// costs about 28 lines (2.5 KB) a host label: 2,000 of them keep /metrics
// near 5 MB, however many hosts share "other".
const DefaultMaxHostLabels = 2000

// HostSnapshot is the state of one destination host at scrape time.
type HostSnapshot struct {
	Host        string
	Queued      int64   // messages spooled for the host
	QueuedBytes int64   // bytes spooled for the host
	InFlight    int     // deliveries in flight
	Rate        float64 // effective rate, requests per second
	Held        bool    // 429 holding pattern or paused
	// ConcurrencyLimit bounds the deliveries in flight: the adaptive limit
	// (concurrency: auto) or the configured concurrency.
	ConcurrencyLimit int
}

// SpoolSnapshot is the whole spool at scrape time.
type SpoolSnapshot struct {
	Messages, Bytes int64
	// Idempotency keys remembered, and their bytes.
	DedupeKeys, DedupeBytes int64
}

var (
	_ deliver.Observer = (*Metrics)(nil)
	_ proxy.Counter    = (*Metrics)(nil)
)

// Metrics records hookpace's own instruments. A nil *Metrics records
// nothing, so code under test may pass nil instead of setting up telemetry.
type Metrics struct {
	maxHosts int

	replication replicationInstruments

	ingest     metric.Int64ObservableCounter
	deliveries metric.Int64Counter
	batched    metric.Int64Counter
	latency    metric.Float64Histogram

	spoolMessages metric.Int64ObservableGauge
	spoolBytes    metric.Int64ObservableGauge
	hostHeld      metric.Int64ObservableGauge
	hostRate      metric.Float64ObservableGauge
	hostInFlight  metric.Int64ObservableGauge
	hostLimit     metric.Int64ObservableGauge
	hostCount     metric.Int64ObservableGauge
	state         stateInstruments
	fleet         fleetInstruments
	dedupe        dedupeInstruments
	rewrite       rewriteInstruments
	tunnels       metric.Int64Counter
	forwarded     metric.Int64Counter

	inboundRejected metric.Int64Counter // inbound.go

	// Ingest counts are plain atomics, observed at collection: every
	// request is counted, and a synchronous OTel counter's attribute
	// lookup and lock cost ~0.7 µs a request on the ingest hot path.
	ingestN     [proxy.NumOutcomes]atomic.Int64
	ingestAttrs [proxy.NumOutcomes][]metric.ObserveOption

	mu    sync.RWMutex
	hosts map[string]*hostEntry // at most maxHosts entries
	other *hostEntry

	hostsFn atomic.Pointer[func() []HostSnapshot]
	spoolFn atomic.Pointer[func() SpoolSnapshot]
	stateFn atomic.Pointer[func() StateSnapshot]
}

// hostEntry caches the attribute sets of one host label, so that recording
// on the hot path allocates nothing.
type hostEntry struct {
	label   string
	observe []metric.ObserveOption
	record  []metric.RecordOption
	add     []metric.AddOption
	// delivered holds the host's series per delivery outcome, each made
	// the first time the host has that outcome: most hosts see two or
	// three of them, and thousands of hosts each made all of them up
	// front (BenchmarkHostEntryMemory, 1,200 B a host before,
	// 472 B with one outcome).
	delivered [deliver.NumOutcomes]atomic.Pointer[[]metric.AddOption]
}

// outcome returns the host's series options for outcome o.
func (e *hostEntry) outcome(o deliver.Outcome) []metric.AddOption {
	if p := e.delivered[o].Load(); p != nil {
		return *p
	}
	opts := []metric.AddOption{deliveryAttrs(e.label, o.String())}
	e.delivered[o].CompareAndSwap(nil, &opts)
	return *e.delivered[o].Load()
}

func newHostEntry(label string) *hostEntry {
	set := attribute.NewSet(attribute.String(LabelHost, label))
	opt := metric.WithAttributeSet(set)
	e := &hostEntry{
		label:   label,
		observe: []metric.ObserveOption{opt},
		record:  []metric.RecordOption{opt},
		add:     []metric.AddOption{opt},
	}
	return e
}

func deliveryAttrs(label, outcome string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(
		attribute.String(LabelHost, label),
		attribute.String(LabelOutcome, outcome),
	))
}

func newMetrics(meter metric.Meter, maxHosts int) (*Metrics, error) {
	if maxHosts <= 0 {
		maxHosts = DefaultMaxHostLabels
	}
	m := &Metrics{
		maxHosts: maxHosts,
		hosts:    make(map[string]*hostEntry),
		other:    newHostEntry(OtherHost),
	}
	for o := range proxy.NumOutcomes {
		m.ingestAttrs[o] = []metric.ObserveOption{
			metric.WithAttributeSet(attribute.NewSet(attribute.String(LabelOutcome, o.String())))}
	}

	var err error
	if m.ingest, err = meter.Int64ObservableCounter(MetricIngestRequests,
		metric.WithDescription("Requests received by the proxy, by outcome."),
		metric.WithUnit("{request}")); err != nil {
		return nil, fmt.Errorf("create %s: %w", MetricIngestRequests, err)
	}
	if m.deliveries, err = meter.Int64Counter(MetricDeliveries,
		metric.WithDescription("Delivery attempts, by destination host and outcome."),
		metric.WithUnit("{attempt}")); err != nil {
		return nil, fmt.Errorf("create %s: %w", MetricDeliveries, err)
	}
	if m.batched, err = meter.Int64Counter(MetricBatchWebhooks,
		metric.WithDescription("Webhooks carried by batched delivery attempts, by destination host and the attempt's outcome (each attempt is also one of hookpace_deliveries_total)."),
		metric.WithUnit("{webhook}")); err != nil {
		return nil, fmt.Errorf("create %s: %w", MetricBatchWebhooks, err)
	}
	if m.latency, err = meter.Float64Histogram(MetricDeliveryLatency,
		metric.WithDescription("Time from enqueue to successful delivery."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(latencyBuckets...)); err != nil {
		return nil, fmt.Errorf("create %s: %w", MetricDeliveryLatency, err)
	}
	if err = m.initGauges(meter); err != nil {
		return nil, err
	}
	if err = m.initState(meter); err != nil {
		return nil, err
	}
	if err = m.initFleet(meter); err != nil {
		return nil, err
	}
	if err = m.initTunnels(meter); err != nil {
		return nil, err
	}
	if err = m.initDedupe(meter); err != nil {
		return nil, err
	}
	if err = m.initReplication(meter); err != nil {
		return nil, err
	}
	if err = m.initInbound(meter); err != nil {
		return nil, err
	}
	if err = m.initRewrite(meter); err != nil {
		return nil, err
	}
	if _, err = meter.RegisterCallback(m.observe,
		m.ingest, m.spoolMessages, m.spoolBytes, m.dedupe.keys, m.dedupe.bytes,
		m.hostHeld, m.hostRate, m.hostInFlight, m.hostLimit, m.hostCount); err != nil {
		return nil, fmt.Errorf("register gauge callback: %w", err)
	}
	return m, nil
}

// initGauges creates the spool's and the hosts' gauges, observed at
// scrape time.
func (m *Metrics) initGauges(meter metric.Meter) error {
	var err error
	if m.spoolMessages, err = meter.Int64ObservableGauge(MetricSpoolMessages,
		metric.WithDescription("Messages in the spool; without a host label the total."),
		metric.WithUnit("{message}")); err != nil {
		return fmt.Errorf("create %s: %w", MetricSpoolMessages, err)
	}
	if m.spoolBytes, err = meter.Int64ObservableGauge(MetricSpoolBytes,
		metric.WithDescription("Bytes in the spool; without a host label the total."),
		metric.WithUnit("By")); err != nil {
		return fmt.Errorf("create %s: %w", MetricSpoolBytes, err)
	}
	// No unit on held: unit "1" would make the exporter append "_ratio".
	if m.hostHeld, err = meter.Int64ObservableGauge(MetricHostHeld,
		metric.WithDescription("1 while deliveries to the host are held (429 holding pattern or paused), else 0.")); err != nil {
		return fmt.Errorf("create %s: %w", MetricHostHeld, err)
	}
	// No unit on rate: "{request}/s" would make the exporter append "_per_second".
	if m.hostRate, err = meter.Float64ObservableGauge(MetricHostRate,
		metric.WithDescription("Effective delivery rate to the host in requests per second (AIMD-adjusted).")); err != nil {
		return fmt.Errorf("create %s: %w", MetricHostRate, err)
	}
	if m.hostInFlight, err = meter.Int64ObservableGauge(MetricHostInFlight,
		metric.WithDescription("Deliveries to the host in flight."),
		metric.WithUnit("{request}")); err != nil {
		return fmt.Errorf("create %s: %w", MetricHostInFlight, err)
	}
	if m.hostLimit, err = meter.Int64ObservableGauge(MetricHostConcurrency,
		metric.WithDescription("The most deliveries to the host in flight at once now: the adaptive limit with concurrency: auto, else the configured concurrency."),
		metric.WithUnit("{request}")); err != nil {
		return fmt.Errorf("create %s: %w", MetricHostConcurrency, err)
	}
	if m.hostCount, err = meter.Int64ObservableGauge(MetricHosts,
		metric.WithDescription("Destination hosts hookpace holds state for; idle ones are forgotten after 10 minutes."),
		metric.WithUnit("{host}")); err != nil {
		return fmt.Errorf("create %s: %w", MetricHosts, err)
	}
	return nil
}

// Ingest counts one request received by the proxy. An outcome that is not
// one of proxy's Outcome constants is a bug in the caller: it panics rather
// than be counted under another outcome's name.
func (m *Metrics) Ingest(_ context.Context, o proxy.Outcome) {
	if m == nil {
		return
	}
	if o >= proxy.NumOutcomes {
		panic("telemetry: unknown " + o.String())
	}
	m.ingestN[o].Add(1)
}

// Delivery counts one delivery attempt to host. An outcome that is not one
// of deliver's Outcome constants panics, as for Ingest.
func (m *Metrics) Delivery(ctx context.Context, host string, o deliver.Outcome) {
	if m == nil {
		return
	}
	if o >= deliver.NumOutcomes {
		panic("telemetry: unknown " + o.String())
	}
	m.deliveries.Add(ctx, 1, m.entry(host).outcome(o)...)
}

// BatchWebhooks counts the n webhooks that one batched delivery attempt to
// host carried, by the attempt's outcome.
func (m *Metrics) BatchWebhooks(ctx context.Context, host string, o deliver.Outcome, n int) {
	if m == nil {
		return
	}
	if o >= deliver.NumOutcomes {
		panic("telemetry: unknown " + o.String())
	}
	m.batched.Add(ctx, int64(n), m.entry(host).outcome(o)...)
}

// DeliveryLatency records the time from enqueue to successful delivery.
func (m *Metrics) DeliveryLatency(ctx context.Context, host string, d time.Duration) {
	if m == nil {
		return
	}
	m.latency.Record(ctx, d.Seconds(), m.entry(host).record...)
}

// ObserveHosts registers the function that reports per-host state at scrape
// time, replacing any earlier one; nil removes it. fn must be safe to call
// from any goroutine and should return quickly.
func (m *Metrics) ObserveHosts(fn func() []HostSnapshot) {
	if m == nil {
		return
	}
	if fn == nil {
		m.hostsFn.Store(nil)
		return
	}
	m.hostsFn.Store(&fn)
}

// ObserveSpool registers the function that reports the spool totals at
// scrape time, replacing any earlier one; nil removes it. Without it the
// spool gauges have no total (unlabelled) series.
func (m *Metrics) ObserveSpool(fn func() SpoolSnapshot) {
	if m == nil {
		return
	}
	if fn == nil {
		m.spoolFn.Store(nil)
		return
	}
	m.spoolFn.Store(&fn)
}

// HostLabel returns the label value under which host is reported: host
// itself for the first MaxHostLabels distinct hosts seen by any instrument,
// OtherHost for every later one. An empty host and a host literally named
// "other" are reported as OtherHost without taking a place.
func (m *Metrics) HostLabel(host string) string {
	if m == nil {
		return host
	}
	return m.entry(host).label
}

func (m *Metrics) entry(host string) *hostEntry {
	if host == "" || host == OtherHost {
		return m.other
	}
	m.mu.RLock()
	e, ok := m.hosts[host]
	full := len(m.hosts) >= m.maxHosts
	m.mu.RUnlock()
	if ok {
		return e
	}
	if full {
		return m.other
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.hosts[host]; ok {
		return e
	}
	if len(m.hosts) >= m.maxHosts {
		return m.other
	}
	e = newHostEntry(host)
	m.hosts[host] = e
	return e
}

// hostAgg is one host label's gauge values, summed over every host that
// shares the label (held: the maximum).
type hostAgg struct {
	entry                   *hostEntry
	queued, bytes, inFlight int64
	limit                   int64
	rate                    float64
	held                    int64
}

// observe is the one callback behind every gauge: it calls the registered
// snapshot functions and reports their values.
func (m *Metrics) observe(_ context.Context, o metric.Observer) error {
	for i := range m.ingestN {
		o.ObserveInt64(m.ingest, m.ingestN[i].Load(), m.ingestAttrs[i]...)
	}
	if fn := m.spoolFn.Load(); fn != nil {
		s := (*fn)()
		o.ObserveInt64(m.spoolMessages, s.Messages)
		o.ObserveInt64(m.spoolBytes, s.Bytes)
		o.ObserveInt64(m.dedupe.keys, s.DedupeKeys)
		o.ObserveInt64(m.dedupe.bytes, s.DedupeBytes)
	}
	fn := m.hostsFn.Load()
	if fn == nil {
		return nil
	}
	snaps := (*fn)()
	o.ObserveInt64(m.hostCount, int64(len(snaps)))
	// A gauge observed twice with one attribute set keeps only the last
	// value, so hosts sharing a label are aggregated first.
	aggs := make([]hostAgg, 0, len(snaps))
	index := make(map[*hostEntry]int, len(snaps))
	for _, s := range snaps {
		e := m.entry(s.Host)
		i, ok := index[e]
		if !ok {
			i = len(aggs)
			index[e] = i
			aggs = append(aggs, hostAgg{entry: e})
		}
		a := &aggs[i]
		a.queued += s.Queued
		a.bytes += s.QueuedBytes
		a.inFlight += int64(s.InFlight)
		a.limit += int64(s.ConcurrencyLimit)
		a.rate += s.Rate
		if s.Held {
			a.held = 1
		}
	}
	for i := range aggs {
		a := &aggs[i]
		o.ObserveInt64(m.spoolMessages, a.queued, a.entry.observe...)
		o.ObserveInt64(m.spoolBytes, a.bytes, a.entry.observe...)
		o.ObserveInt64(m.hostInFlight, a.inFlight, a.entry.observe...)
		o.ObserveInt64(m.hostLimit, a.limit, a.entry.observe...)
		o.ObserveFloat64(m.hostRate, a.rate, a.entry.observe...)
		o.ObserveInt64(m.hostHeld, a.held, a.entry.observe...)
	}
	return nil
}

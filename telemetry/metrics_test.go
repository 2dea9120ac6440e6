package telemetry

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/proxy"
)

func newTelemetry(t *testing.T, opts Options) *Telemetry {
	t.Helper()
	tel, err := Setup(context.Background(), opts)
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	t.Cleanup(func() {
		if err := tel.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return tel
}

// exposition is one scrape of Handler(): series (name plus labels, exactly
// as printed) to value, and metric family name to type.
type exposition struct {
	text   string
	series map[string]string
	types  map[string]string
}

func scrape(t *testing.T, tel *Telemetry) exposition {
	t.Helper()
	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: status %d: %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("GET /metrics: Content-Type %q, want text/plain", ct)
	}
	e := exposition{text: rec.Body.String(), series: map[string]string{}, types: map[string]string{}}
	sc := bufio.NewScanner(strings.NewReader(e.text))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			e.types[name] = typ
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		e.series[line[:i]] = line[i+1:]
	}
	return e
}

// expect checks series values; a value of "" means the series must be absent.
func (e exposition) expect(t *testing.T, want map[string]string) {
	t.Helper()
	for series, value := range want {
		got, ok := e.series[series]
		switch {
		case value == "" && ok:
			t.Errorf("%s = %s, want no such series", series, got)
		case value != "" && !ok:
			t.Errorf("%s missing", series)
		case value != "" && got != value:
			t.Errorf("%s = %s, want %s", series, got, value)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", e.text)
	}
}

func TestPrometheusSeriesNames(t *testing.T) {
	tel := newTelemetry(t, Options{})
	m, ctx := tel.Metrics, context.Background()

	m.Ingest(ctx, proxy.OutcomeAccepted)
	m.Ingest(ctx, proxy.OutcomeAccepted)
	m.Ingest(ctx, proxy.OutcomeTooLarge)
	for range 3 {
		m.Delivery(ctx, "a.example", deliver.OutcomeDelivered)
	}
	m.Delivery(ctx, "a.example", deliver.OutcomeRetried)
	m.DeliveryLatency(ctx, "a.example", 250*time.Millisecond)
	m.Deduplicated(ctx, "a.example")
	m.Deduplicated(ctx, "a.example")
	m.Rewritten(ctx, "a.example", 1, 2)
	m.Rewritten(ctx, "a.example", 0, 1)
	m.Coalesced(ctx, "b.example")
	m.ObserveSpool(func() SpoolSnapshot { return SpoolSnapshot{Messages: 7, Bytes: 2048, DedupeKeys: 3, DedupeBytes: 96} })
	m.ObserveHosts(func() []HostSnapshot {
		return []HostSnapshot{
			{Host: "a.example", Queued: 5, QueuedBytes: 1500, InFlight: 2, Rate: 12.5, Held: true, ConcurrencyLimit: 5},
			{Host: "b.example", Queued: 2, QueuedBytes: 548, Rate: 3},
		}
	})

	e := scrape(t, tel)
	wantTypes := map[string]string{
		"hookpace_ingest_requests_total":    "counter",
		"hookpace_deliveries_total":         "counter",
		"hookpace_delivery_latency_seconds": "histogram",
		"hookpace_spool_messages":           "gauge",
		"hookpace_spool_bytes":              "gauge",
		"hookpace_host_held":                "gauge",
		"hookpace_host_rate":                "gauge",
		"hookpace_host_in_flight":           "gauge",
		MetricHostConcurrency:               "gauge",
		"hookpace_hosts":                    "gauge",
		MetricDeduplicated:                  "counter",
		MetricCoalesced:                     "counter",
		MetricDedupeKeys:                    "gauge",
		MetricDedupeBytes:                   "gauge",
		MetricRewritten:                     "counter",
		MetricRewriteDrop:                   "counter",
		MetricRewriteMasked:                 "counter",
	}
	for name, typ := range e.types {
		if strings.HasPrefix(name, "hookpace_") && wantTypes[name] == "" {
			t.Errorf("unexpected metric family %s (%s)", name, typ)
		}
	}
	for name, typ := range wantTypes {
		if e.types[name] != typ {
			t.Errorf("metric family %s: type %q, want %q", name, e.types[name], typ)
		}
	}

	for series := range e.series {
		if strings.HasPrefix(series, "hookpace_") && strings.Contains(series, "otel_scope_") {
			t.Errorf("%s: scope labels should be off", series)
		}
	}

	e.expect(t, map[string]string{
		`hookpace_ingest_deduplicated_total{host="a.example"}`:    "2",
		`hookpace_ingest_coalesced_total{host="b.example"}`:       "1",
		`hookpace_rewrite_webhooks_total{host="a.example"}`:       "2",
		`hookpace_rewrite_dropped_fields_total{host="a.example"}`: "1",
		`hookpace_rewrite_masked_fields_total{host="a.example"}`:  "3",
		`hookpace_dedupe_keys`:                                    "3",
		`hookpace_dedupe_bytes`:                                   "96",
	})
	e.expect(t, map[string]string{
		`hookpace_ingest_requests_total{outcome="accepted"}`:                   "2",
		`hookpace_ingest_requests_total{outcome="too_large"}`:                  "1",
		`hookpace_deliveries_total{host="a.example",outcome="delivered"}`:      "3",
		`hookpace_deliveries_total{host="a.example",outcome="retried"}`:        "1",
		`hookpace_delivery_latency_seconds_bucket{host="a.example",le="0.1"}`:  "0",
		`hookpace_delivery_latency_seconds_bucket{host="a.example",le="0.25"}`: "1",
		`hookpace_delivery_latency_seconds_bucket{host="a.example",le="3600"}`: "1",
		`hookpace_delivery_latency_seconds_bucket{host="a.example",le="+Inf"}`: "1",
		`hookpace_delivery_latency_seconds_sum{host="a.example"}`:              "0.25",
		`hookpace_delivery_latency_seconds_count{host="a.example"}`:            "1",
		`hookpace_spool_messages`:                                              "7",
		`hookpace_spool_bytes`:                                                 "2048",
		`hookpace_spool_messages{host="a.example"}`:                            "5",
		`hookpace_spool_bytes{host="a.example"}`:                               "1500",
		`hookpace_spool_bytes{host="b.example"}`:                               "548",
		`hookpace_host_held{host="a.example"}`:                                 "1",
		`hookpace_host_held{host="b.example"}`:                                 "0",
		`hookpace_host_rate{host="a.example"}`:                                 "12.5",
		`hookpace_host_in_flight{host="a.example"}`:                            "2",
		`hookpace_host_in_flight{host="b.example"}`:                            "0",
		`hookpace_host_concurrency_limit{host="a.example"}`:                    "5",
		`hookpace_hosts`:             "2",
		`hookpace_spool_bytes_bytes`: "",
		`hookpace_deliveries_total{host="a.example",outcome="held"}`: "",
	})
}

func TestHostLabelCap(t *testing.T) {
	tel := newTelemetry(t, Options{MaxHostLabels: 2})
	m, ctx := tel.Metrics, context.Background()

	m.Delivery(ctx, "a.example", deliver.OutcomeDelivered)
	m.DeliveryLatency(ctx, "b.example", time.Second) // any instrument takes a place
	m.Delivery(ctx, "c.example", deliver.OutcomeDelivered)
	m.Delivery(ctx, "c.example", deliver.OutcomeDelivered)
	m.Delivery(ctx, "d.example", deliver.OutcomeDelivered)
	m.Delivery(ctx, "d.example", deliver.OutcomeDead)
	m.Delivery(ctx, "a.example", deliver.OutcomeDelivered)

	for host, want := range map[string]string{
		"a.example": "a.example", "b.example": "b.example",
		"c.example": OtherHost, "d.example": OtherHost, "": OtherHost, "other": OtherHost,
	} {
		if got := m.HostLabel(host); got != want {
			t.Errorf("HostLabel(%q) = %q, want %q", host, got, want)
		}
	}

	m.ObserveHosts(func() []HostSnapshot {
		return []HostSnapshot{
			{Host: "a.example", Queued: 1, QueuedBytes: 10, InFlight: 1, Rate: 1},
			{Host: "c.example", Queued: 2, QueuedBytes: 20, InFlight: 1, Rate: 2, Held: true},
			{Host: "d.example", Queued: 3, QueuedBytes: 30, InFlight: 2, Rate: 0.5},
			{Host: "e.example", Queued: 4, QueuedBytes: 40},
		}
	})

	scrape(t, tel).expect(t, map[string]string{
		`hookpace_deliveries_total{host="a.example",outcome="delivered"}`: "2",
		`hookpace_deliveries_total{host="other",outcome="delivered"}`:     "3",
		`hookpace_deliveries_total{host="other",outcome="dead"}`:          "1",
		`hookpace_deliveries_total{host="c.example",outcome="delivered"}`: "",
		`hookpace_delivery_latency_seconds_count{host="b.example"}`:       "1",
		`hookpace_spool_messages{host="a.example"}`:                       "1",
		`hookpace_spool_messages{host="other"}`:                           "9",
		`hookpace_spool_bytes{host="other"}`:                              "90",
		`hookpace_host_in_flight{host="other"}`:                           "3",
		`hookpace_host_rate{host="other"}`:                                "2.5",
		`hookpace_host_held{host="other"}`:                                "1",
		`hookpace_host_held{host="a.example"}`:                            "0",
		`hookpace_spool_messages{host="e.example"}`:                       "",
		`hookpace_spool_messages`:                                         "", // no ObserveSpool
	})
}

func TestObserveReplacesCallback(t *testing.T) {
	tel := newTelemetry(t, Options{})
	m := tel.Metrics

	m.ObserveSpool(func() SpoolSnapshot { return SpoolSnapshot{Messages: 1, Bytes: 1} })
	m.ObserveSpool(func() SpoolSnapshot { return SpoolSnapshot{Messages: 2, Bytes: 20} })
	m.ObserveHosts(func() []HostSnapshot { return []HostSnapshot{{Host: "a.example", Queued: 1}} })
	m.ObserveHosts(func() []HostSnapshot { return []HostSnapshot{{Host: "b.example", Queued: 4}} })
	scrape(t, tel).expect(t, map[string]string{
		`hookpace_spool_messages`:                   "2",
		`hookpace_spool_bytes`:                      "20",
		`hookpace_spool_messages{host="a.example"}`: "",
		`hookpace_spool_messages{host="b.example"}`: "4",
	})

	// A host that is gone from the snapshot is gone from the scrape.
	m.ObserveHosts(nil)
	scrape(t, tel).expect(t, map[string]string{
		`hookpace_spool_messages`:                   "2",
		`hookpace_spool_messages{host="b.example"}`: "",
	})
}

func TestNilMetricsIsNoop(t *testing.T) {
	var m *Metrics
	ctx := context.Background()
	m.Ingest(ctx, proxy.OutcomeAccepted)
	m.Delivery(ctx, "a.example", deliver.OutcomeDelivered)
	m.DeliveryLatency(ctx, "a.example", time.Second)
	m.ObserveHosts(func() []HostSnapshot { return nil })
	m.ObserveSpool(func() SpoolSnapshot { return SpoolSnapshot{} })
	if got := m.HostLabel("a.example"); got != "a.example" {
		t.Errorf("HostLabel = %q", got)
	}
}

func TestDeliveryDoesNotAllocate(t *testing.T) {
	tel := newTelemetry(t, Options{})
	m, ctx := tel.Metrics, context.Background()
	m.Delivery(ctx, "a.example", deliver.OutcomeDelivered)
	m.DeliveryLatency(ctx, "a.example", time.Millisecond)
	m.Ingest(ctx, proxy.OutcomeAccepted)
	if n := testing.AllocsPerRun(100, func() {
		m.Delivery(ctx, "a.example", deliver.OutcomeDelivered)
		m.DeliveryLatency(ctx, "a.example", time.Millisecond)
		m.Ingest(ctx, proxy.OutcomeAccepted)
	}); n != 0 {
		t.Errorf("allocations per Delivery+DeliveryLatency+Ingest: %v, want 0", n)
	}
}

// TestHTTPClientMetrics: WrapTransport's client histograms appear on
// /metrics with the semantic conventions' attributes, hookpace's capped
// host label in place of the server's address, and error.type for a
// request that got no answer.
func TestHTTPClientMetrics(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	get := func(t *testing.T, rt http.RoundTripper, url string) {
		t.Helper()
		resp, err := (&http.Client{Transport: rt}).Get(url + "/hook")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	durationCount := func(e exposition, label string) string {
		for series, value := range e.series {
			if strings.HasPrefix(series, MetricHTTPClientDuration+"_count{") && strings.Contains(series, label) {
				if strings.Contains(series, "server_address") {
					t.Errorf("%s: server_address label should be dropped", series)
				}
				return value
			}
		}
		t.Logf("scrape:\n%s", e.text)
		return ""
	}

	t.Run("series", func(t *testing.T) {
		tel := newTelemetry(t, Options{})
		rt := tel.WrapTransport(srv.Client().Transport)
		resp, err := (&http.Client{Transport: rt}).Post(srv.URL+"/hook", "application/json", strings.NewReader(`{"event":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		closed := httptest.NewServer(srv.Config.Handler)
		closedURL := closed.URL
		closed.Close()
		if _, err := (&http.Client{Transport: rt}).Get(closedURL); err == nil {
			t.Fatal("request to a closed server succeeded")
		}
		e := scrape(t, tel)
		if e.types[MetricHTTPClientDuration] != "histogram" {
			t.Fatalf("%s: type %q, want histogram", MetricHTTPClientDuration, e.types[MetricHTTPClientDuration])
		}
		labels := `{http_request_method="POST",http_response_status_code="204",network_protocol_name="http",network_protocol_version="1.1",url_scheme="http"}`
		for series, want := range map[string]string{
			MetricHTTPClientDuration + "_count" + labels: "1",
			MetricHTTPClientBodySize + "_count" + labels: "1",
			MetricHTTPClientBodySize + "_sum" + labels:   "13",
		} {
			if got := e.series[series]; got != want {
				t.Errorf("%s = %q, want %s", series, got, want)
			}
		}
		failed := `{error_type="connect",http_request_method="GET",network_protocol_name="http",network_protocol_version="1.1",url_scheme="http"}`
		if got := e.series[MetricHTTPClientDuration+"_count"+failed]; got != "1" {
			t.Errorf("%s_count%s = %q, want 1", MetricHTTPClientDuration, failed, got)
			t.Logf("scrape:\n%s", e.text)
		}
	})

	t.Run("no host label", func(t *testing.T) {
		srv2 := httptest.NewServer(srv.Config.Handler)
		defer srv2.Close()
		tel := newTelemetry(t, Options{})
		rt := tel.WrapTransport(srv.Client().Transport)
		get(t, rt, srv.URL)
		get(t, rt, srv2.URL)
		get(t, rt, srv2.URL)
		e := scrape(t, tel)
		if got := durationCount(e, `http_response_status_code="204"`); got != "3" {
			t.Errorf("%s_count{http_response_status_code=\"204\"} = %q, want 3 (two hosts, one series)", MetricHTTPClientDuration, got)
		}
		for series := range e.series {
			if strings.HasPrefix(series, "http_client_") && strings.Contains(series, "host=") {
				t.Errorf("%s: the client histograms have no host label", series)
			}
		}
	})
}

// The label cap that applies is MaxHostLabels, also above the SDK's own
// default cardinality limit (2,000 attribute sets an instrument), and the
// hosts beyond it share host="other" rather than the SDK's overflow set.
func TestHostLabelCapAboveSDKLimit(t *testing.T) {
	const labels, hosts = 2500, 2600
	tel := newTelemetry(t, Options{MaxHostLabels: labels})
	m, ctx := tel.Metrics, context.Background()
	for i := range hosts {
		h := fmt.Sprintf("h%d.example", i)
		m.Delivery(ctx, h, deliver.OutcomeDelivered)
		m.Delivery(ctx, h, deliver.OutcomeRetried)
		m.DeliveryLatency(ctx, h, time.Millisecond)
	}
	e := scrape(t, tel)
	if strings.Contains(e.text, "otel_metric_overflow") {
		t.Errorf("the SDK folded series into otel_metric_overflow below max_host_labels")
	}
	own := map[string]int{}
	for series := range e.series {
		for _, name := range []string{MetricDeliveries + "{", MetricDeliveryLatency + "_count{"} {
			if strings.HasPrefix(series, name) && !strings.Contains(series, `host="other"`) {
				own[name]++
			}
		}
	}
	if got := own[MetricDeliveries+"{"]; got != 2*labels {
		t.Errorf("%s: %d series with a host of their own, want %d (2 outcomes x %d hosts)", MetricDeliveries, got, 2*labels, labels)
	}
	if got := own[MetricDeliveryLatency+"_count{"]; got != labels {
		t.Errorf("%s_count: %d series with a host of their own, want %d", MetricDeliveryLatency, got, labels)
	}
	e.expect(t, map[string]string{
		`hookpace_deliveries_total{host="other",outcome="delivered"}`: "100",
		`hookpace_delivery_latency_seconds_count{host="other"}`:       "100",
	})
}

func TestHostLabelConcurrent(t *testing.T) {
	tel := newTelemetry(t, Options{MaxHostLabels: 50})
	m := tel.Metrics
	var wg sync.WaitGroup
	labels := make([]map[string]string, 8)
	for g := range labels {
		labels[g] = map[string]string{}
		wg.Go(func() {
			for i := range 200 {
				host := fmt.Sprintf("h%d.example", (i*7+g*13)%200)
				m.Delivery(context.Background(), host, deliver.OutcomeRetried)
				labels[g][host] = m.HostLabel(host)
			}
		})
	}
	wg.Wait()

	own := map[string]bool{}
	for _, got := range labels {
		for host, label := range got {
			if label != host && label != OtherHost {
				t.Fatalf("HostLabel(%q) = %q", host, label)
			}
			if label == host {
				own[host] = true
			}
			if want := m.HostLabel(host); label != want {
				t.Errorf("HostLabel(%q) was %q, is now %q", host, label, want)
			}
		}
	}
	if len(own) != 50 {
		t.Errorf("%d hosts kept their own label, want 50", len(own))
	}
}

func TestStateGauges(t *testing.T) {
	tel := newTelemetry(t, Options{MaxHostLabels: 1})
	m := tel.Metrics
	m.ObserveState(func() StateSnapshot {
		return StateSnapshot{MaxMessages: 1000, MaxBytes: 1 << 20, HighWater: 0.8, LowWater: 0.5, Usage: 0.85,
			Refusing: RefusingHighWater, DeadLetters: 3, OldestAge: 90,
			DeadByHost: map[string]int64{"a.example": 1, "d.example": 1, "e.example": 1}, // d and e: "other"
			Hosts: []HostState{
				{Host: "a.example", OldestAge: 90, BreakerOpen: true},
				{Host: "b.example", OldestAge: 30, Paused: true}, // beyond the cap of 1: "other"
				{Host: "c.example", OldestAge: 60},
			}}
	})
	e := scrape(t, tel)
	e.expect(t, map[string]string{
		`hookpace_spool_limit_messages`:                      "1000",
		`hookpace_spool_limit_bytes`:                         "1.048576e+06",
		`hookpace_spool_watermark{level="high"}`:             "0.8",
		`hookpace_spool_watermark{level="low"}`:              "0.5",
		`hookpace_spool_usage`:                               "0.85",
		`hookpace_spool_accepting`:                           "0",
		`hookpace_spool_refusing{reason="high_water"}`:       "1",
		`hookpace_spool_refusing{reason="disk_full"}`:        "0",
		`hookpace_spool_refusing{reason="dir_gone"}`:         "0",
		`hookpace_ready`:                                     "0",
		`hookpace_dead_letters`:                              "3",
		`hookpace_host_dead_letters{host="a.example"}`:       "1",
		`hookpace_host_dead_letters{host="other"}`:           "2",
		`hookpace_spool_oldest_age_seconds`:                  "90",
		`hookpace_host_oldest_age_seconds{host="a.example"}`: "90",
		`hookpace_host_oldest_age_seconds{host="other"}`:     "60",
		`hookpace_host_breaker_open{host="a.example"}`:       "1",
		`hookpace_host_breaker_open{host="other"}`:           "0",
		`hookpace_host_paused{host="a.example"}`:             "0",
		`hookpace_host_paused{host="other"}`:                 "1",
		`hookpace_host_oldest_age_seconds_seconds`:           "",
		`hookpace_spool_limit_bytes_bytes`:                   "",
	})
	for name, typ := range map[string]string{"hookpace_spool_refusing": "gauge", "hookpace_host_oldest_age_seconds": "gauge"} {
		if e.types[name] != typ {
			t.Errorf("%s: type %q, want %s", name, e.types[name], typ)
		}
	}
}

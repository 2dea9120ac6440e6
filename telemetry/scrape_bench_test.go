package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookpace/hookpace/deliver"
)

// hostsTelemetry is a Telemetry whose metrics have seen n hosts, each with
// one delivery, its latency, one attempt of the HTTP client and a
// queued webhook in its gauges.
func hostsTelemetry(tb testing.TB, n, maxLabels int) *Telemetry {
	tb.Helper()
	tel, err := Setup(context.Background(), Options{MaxHostLabels: maxLabels})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	m, ctx := tel.Metrics, context.Background()
	ct := tel.WrapTransport(nil).(*clientTransport)
	snaps := make([]HostSnapshot, n)
	states := make([]HostState, n)
	for i := range n {
		h := fmt.Sprintf("h%d.partner.example:443", i)
		m.Delivery(ctx, h, deliver.OutcomeDelivered)
		m.DeliveryLatency(ctx, h, 30*time.Millisecond)
		set := ct.attributeSet(clientKey{method: "POST", scheme: "https", proto: "http", version: "1.1", status: 200})
		ct.duration.Record(ctx, 0.02, set)
		ct.bodySize.Record(ctx, 1024, set)
		snaps[i] = HostSnapshot{Host: h, Queued: 1, QueuedBytes: 1024, Rate: 10, ConcurrencyLimit: 4}
		states[i] = HostState{Host: h, OldestAge: 1}
	}
	m.ObserveHosts(func() []HostSnapshot { return snaps })
	m.ObserveState(func() StateSnapshot { return StateSnapshot{Hosts: states, Ready: true} })
	return tel
}

// BenchmarkScrapeHosts is one GET /metrics of n hosts with their own
// labels: the time and the bytes of a scrape, per host.
func BenchmarkScrapeHosts(b *testing.B) {
	for _, n := range []int{2000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			tel := hostsTelemetry(b, n, n)
			var size int
			for b.Loop() {
				rec := httptest.NewRecorder()
				tel.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
				size = rec.Body.Len()
			}
			b.ReportMetric(float64(size)/float64(n), "B/host")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(n), "µs/host")
		})
	}
}

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// A partner down for one outage (four 503s: the first opens the breaker,
// three half-open probes fail, the fourth probe gets 200): one
// breaker.opened, then one breaker.closed that counts the failed probes.
func TestBreakerOpenedOnceAnOutageE2E(t *testing.T) {
	t.Parallel()
	ops := NewReceiver(t)
	partner := NewReceiver(t)
	partner.Handle = func(w http.ResponseWriter, _ *http.Request, n int) {
		if n <= 4 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
events: {url: %q}
hosts:
  %q: {backoff_initial: 10ms, backoff_max: 20ms, max_attempts: 50, breaker_failures: 1, breaker_cooldown: 100ms}
`, ops.URL, partner.Host()))
	if status, _ := hp.Post(hp.Client(), partner.URL+"/orders", WebhookBody(1), nil); status != http.StatusAccepted {
		t.Fatalf("POST: %d", status)
	}
	partner.WaitFor(t, 30*time.Second, "the delivery", func(as []Arrival) bool { return Delivered2xx(as) == 1 })
	count := func(as []Arrival, typ string) (n int, last map[string]any) {
		for _, a := range as {
			var ev struct {
				Type string
				Data map[string]any
			}
			if json.Unmarshal(a.Body, &ev) == nil && ev.Type == typ && ev.Data["host"] == partner.Host() {
				n, last = n+1, ev.Data
			}
		}
		return n, last
	}
	ops.WaitFor(t, 30*time.Second, "breaker.closed", func(as []Arrival) bool { n, _ := count(as, "breaker.closed"); return n == 1 })
	as := ops.Arrivals()
	if n, _ := count(as, "breaker.opened"); n != 1 {
		t.Errorf("%d breaker.opened for one outage with 3 failed probes, want 1", n)
	}
	if _, closed := count(as, "breaker.closed"); closed["failed_probes"] != float64(3) || closed["opened_at"] == nil {
		t.Errorf("breaker.closed data %v; want failed_probes 3 and opened_at", closed)
	}
}

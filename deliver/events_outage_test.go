package deliver

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// One outage is one breaker.opened: the breaker opens on the first
// failure, each failed half-open probe opens it again without an event,
// and the probe that succeeds closes it with breaker.closed, which says
// how many probes failed.
func TestEventsBreakerOnceAnOutage(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 4 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	pol := policy(1000, 100, 1)
	pol.BackoffInitial, pol.BackoffMax, pol.MaxAttempts = time.Millisecond, time.Millisecond, 100
	pol.Limits.BreakerFailures, pol.Limits.BreakerCooldown = 1, 10*time.Millisecond
	_, q, evs := eventsSetup(t, pol)
	host := strings.TrimPrefix(srv.URL, "http://")
	appendTo(t, q, srv.URL+"/flaky")
	var opened []Event
	for ev := range evs {
		if ev.Type == EventBreakerOpened {
			opened = append(opened, ev)
		}
		if ev.Type == EventBreakerClosed {
			if ev.Host != host || ev.Data["failed_probes"] != 3 || ev.Data["opened_at"] == nil {
				t.Errorf("breaker.closed %+v; want 3 failed probes and when it opened", ev)
			}
			break
		}
	}
	if len(opened) != 1 || opened[0].Data["from"] != "closed" {
		t.Fatalf("%d breaker.opened for one outage (4 failures, 3 of them probes): %+v", len(opened), opened)
	}
}

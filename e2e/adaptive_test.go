package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/overload"
	"github.com/hookpace/hookpace/internal/redistest"
)

// newQueuePartner is a 4-worker partner: 20 ms a request
// plus 5 ms for each one still waiting, 503 after 500 ms waiting.
func newQueuePartner(workers int) *overload.Partner {
	return overload.New(workers, 20*time.Millisecond, 5*time.Millisecond, 500*time.Millisecond)
}

// With concurrency: auto (max 64) and a rate set far too high
// (1000/s, burst 100), hookpace finds the capacity of a partner with 4
// workers that queues, slows down and then answers 503: every webhook
// arrives, the partner sees far fewer than 64 at once and few 503s, and
// /v1/hosts, hookpace status and /metrics say what the limit is and why.
// Bounds are loose: a loaded 2-core machine adds its own latency.
func TestAdaptiveConcurrency(t *testing.T) {
	t.Parallel()
	p := newQueuePartner(4)
	rc := NewReceiver(t)
	rc.Handle = func(w http.ResponseWriter, r *http.Request, _ int) { p.ServeHTTP(w, r) }
	hp := Start(t, `
egress: {allow: ["127.0.0.0/8"]}
defaults: {rate: 1000/s, burst: 100, concurrency: auto, max_concurrency: 64, backoff_initial: 100ms}
`)
	const n = 600
	acked := PostAll(t, hp, n, 16, func(i int) string { return fmt.Sprintf("%s/hook/%d", rc.URL, i) })
	rc.WaitFor(t, 3*time.Minute, "all webhooks delivered", func(as []Arrival) bool {
		ok := map[string]bool{}
		for _, a := range as {
			if a.Status == http.StatusOK {
				ok[a.Path] = true
			}
		}
		return len(ok) == len(acked)
	})
	peak, rejected, p99 := p.Stats()
	t.Logf("%d webhooks: the partner saw at most %d at once, answered %d 503s, p99 service %v", n, peak, rejected, p99)
	if peak > 24 {
		t.Errorf("the partner had %d requests at once, want far fewer than max_concurrency 64", peak)
	}
	if rejected > n/20 {
		t.Errorf("%d 503s for %d webhooks, want at most %d", rejected, n, n/20)
	}

	var hosts struct {
		Hosts []struct {
			Host             string `json:"host"`
			Concurrency      int    `json:"concurrency"`
			ConcurrencyLimit int    `json:"concurrency_limit"`
			ConcurrencyWhy   string `json:"concurrency_why"`
		}
	}
	hp.AdminJSON("/v1/hosts", &hosts)
	if len(hosts.Hosts) != 1 {
		t.Fatalf("/v1/hosts: %+v", hosts.Hosts)
	}
	h := hosts.Hosts[0]
	if h.Concurrency != 64 || h.ConcurrencyLimit < 1 || h.ConcurrencyLimit > 24 ||
		!strings.HasPrefix(h.ConcurrencyWhy, fmt.Sprintf("auto %d (", h.ConcurrencyLimit)) || !strings.Contains(h.ConcurrencyWhy, "min RTT") {
		t.Errorf("/v1/hosts: %+v", h)
	}
	if m := hp.Metrics(); !strings.Contains(m, fmt.Sprintf("hookpace_host_concurrency_limit{host=%q}", rc.Host())) {
		t.Errorf("no hookpace_host_concurrency_limit for %s on /metrics", rc.Host())
	}
	out, err := hp.CLI("status")
	if err != nil || !strings.Contains(out, " of auto ") {
		t.Errorf("hookpace status: %v\n%s", err, out)
	}
}

// Three replicas sharing limits through a real Redis,
// each with concurrency: auto, against the same 4-worker partner. Each
// replica's controller reacts to the latency they cause together, so
// they do not add up to an overload: every webhook arrives once, the
// partner sees far fewer than the 64 at once that a fixed concurrency of
// 64 (counted fleet-wide) would send, and few 503s.
func TestAdaptiveConcurrencyFleet(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	p := newQueuePartner(4)
	rc := NewReceiver(t)
	rc.Handle = func(w http.ResponseWriter, r *http.Request, _ int) { p.ServeHTTP(w, r) }
	hps := startFleet(t, srv, 3, fmt.Sprintf(`"%s": {rate: 1000/s, burst: 100, concurrency: auto, max_concurrency: 64, backoff_initial: 100ms}`, rc.Host()))
	const n = 600
	postSpread(t, hps, rc, "fleet", n)
	fleetCheckOnce(t, rc, "fleet", n, 3*time.Minute)
	peak, rejected, p99 := p.Stats()
	t.Logf("3 replicas, %d webhooks: the partner saw at most %d at once, answered %d 503s, p99 service %v", n, peak, rejected, p99)
	// Three slow starts overlap (each from 2, doubling): 12-16 at once
	// measured, for a moment.
	if peak > 32 {
		t.Errorf("the partner had %d requests at once, want far fewer than max_concurrency 64", peak)
	}
	if rejected > n/20 {
		t.Errorf("%d 503s for %d webhooks, want at most %d", rejected, n, n/20)
	}
}

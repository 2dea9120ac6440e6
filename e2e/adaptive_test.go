package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
)

// queuePartner is a real overloadable receiver: workers serve one request
// at a time each, the rest wait in a queue; a request's service time
// grows with the queue it leaves behind (base + perQueued for each
// request still waiting), and one that waited longer than maxWait gets a
// 503.
type queuePartner struct {
	workers   chan struct{}
	base      time.Duration
	perQueued time.Duration
	maxWait   time.Duration

	mu       sync.Mutex
	waiting  int
	inside   int // requests at the partner, waiting or served
	peak     int
	services []time.Duration
	rejected int
}

func newQueuePartner(workers int) *queuePartner {
	return &queuePartner{workers: make(chan struct{}, workers), base: 20 * time.Millisecond,
		perQueued: 5 * time.Millisecond, maxWait: 500 * time.Millisecond}
}

func (p *queuePartner) serve(w http.ResponseWriter, _ *http.Request, _ int) {
	p.mu.Lock()
	p.waiting++
	p.inside++
	p.peak = max(p.peak, p.inside)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inside--
		p.mu.Unlock()
	}()
	timeout := time.NewTimer(p.maxWait)
	defer timeout.Stop()
	select {
	case p.workers <- struct{}{}:
	case <-timeout.C:
		p.mu.Lock()
		p.waiting--
		p.rejected++
		p.mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	p.mu.Lock()
	p.waiting--
	svc := p.base + time.Duration(p.waiting)*p.perQueued
	p.services = append(p.services, svc)
	p.mu.Unlock()
	time.Sleep(svc) // the partner's work
	<-p.workers
	w.WriteHeader(http.StatusOK)
}

func (p *queuePartner) stats() (peak, rejected int, p99 time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := slices.Clone(p.services)
	slices.Sort(s)
	if len(s) > 0 {
		p99 = s[len(s)*99/100]
	}
	return p.peak, p.rejected, p99
}

// Issue 33: with concurrency: auto (max 64) and a rate set far too high
// (1000/s, burst 100), hookpace finds the capacity of a partner with 4
// workers that queues, slows down and then answers 503: every webhook
// arrives, the partner sees far fewer than 64 at once and few 503s, and
// /v1/hosts, hookpace status and /metrics say what the limit is and why.
// Bounds are loose: a loaded 2-core machine adds its own latency.
func TestAdaptiveConcurrency(t *testing.T) {
	p := newQueuePartner(4)
	rc := NewReceiver(t)
	rc.Handle = p.serve
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
	peak, rejected, p99 := p.stats()
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

// Issue 33, fleet: three replicas sharing limits through a real Redis,
// each with concurrency: auto, against the same 4-worker partner. Each
// replica's controller reacts to the latency they cause together, so
// they do not add up to an overload: every webhook arrives once, the
// partner sees far fewer than the 64 at once that a fixed concurrency of
// 64 (counted fleet-wide) would send, and few 503s.
func TestAdaptiveConcurrencyFleet(t *testing.T) {
	srv := redistest.Start(t)
	p := newQueuePartner(4)
	rc := NewReceiver(t)
	rc.Handle = p.serve
	hps := startFleet(t, srv, 3, fmt.Sprintf(`"%s": {rate: 1000/s, burst: 100, concurrency: auto, max_concurrency: 64, backoff_initial: 100ms}`, rc.Host()))
	const n = 600
	postSpread(t, hps, rc, "fleet", n)
	fleetCheckOnce(t, rc, "fleet", n, 3*time.Minute)
	peak, rejected, p99 := p.stats()
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

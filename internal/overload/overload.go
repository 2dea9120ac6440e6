// Package overload is a real partner that can be overloaded, for the
// tests and the bench of adaptive concurrency: workers serve one request
// at a time each and the rest wait in a queue; a request's service time
// grows with the queue it leaves behind (Base plus PerQueued for each
// request still waiting), and one that waited longer than MaxWait gets a
// 503, as a partner whose database pool is exhausted does.
package overload

import (
	"net/http"
	"slices"
	"sync"
	"time"
)

// Partner is an overloadable partner; serve it with ServeHTTP.
type Partner struct {
	workers   chan struct{}
	base      time.Duration
	perQueued time.Duration
	maxWait   time.Duration

	mu       sync.Mutex
	cond     *sync.Cond
	waiting  int
	inside   int // requests at the partner, waiting or served
	peak     int
	ok       int
	lastOK   time.Time
	services []time.Duration
	rejected int
}

// New returns a partner with that many workers, each request served in
// base plus perQueued for each one still waiting, and 503 after maxWait.
func New(workers int, base, perQueued, maxWait time.Duration) *Partner {
	p := &Partner{workers: make(chan struct{}, workers), base: base, perQueued: perQueued, maxWait: maxWait}
	p.cond = sync.NewCond(&p.mu)
	return p
}

func (p *Partner) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
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
	p.mu.Lock()
	p.ok++
	p.lastOK = time.Now()
	p.cond.Broadcast()
	p.mu.Unlock()
}

// WaitOK waits for n 2xx answers, or until limit after t0. took is from
// t0 to the nth; capped says the limit came first.
func (p *Partner) WaitOK(n int, t0 time.Time, limit time.Duration) (ok int, took time.Duration, capped bool) {
	timer := time.AfterFunc(time.Until(t0.Add(limit)), func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	defer timer.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.ok < n && time.Since(t0) < limit {
		p.cond.Wait()
	}
	if p.ok < n {
		return p.ok, limit, true
	}
	return p.ok, p.lastOK.Sub(t0), false
}

// Stats are the most requests at the partner at once, the 503s it
// answered, and the 99th percentile of its service times.
func (p *Partner) Stats() (peak, rejected int, p99 time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := slices.Clone(p.services)
	slices.Sort(s)
	if len(s) > 0 {
		p99 = s[len(s)*99/100]
	}
	return p.peak, p.rejected, p99
}

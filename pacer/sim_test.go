package pacer

import (
	"slices"
	"sync"
	"time"
)

// partner simulates a receiver with a number of workers and a FIFO queue
// in front of them: a request waits for a worker (503 after maxWait), and
// its service time grows with the queue it leaves behind (base +
// perQueued for each request still waiting). Latency is thus a function
// of the requests in flight. Run it under testing/synctest.
type partner struct {
	mu        sync.Mutex
	workers   chan struct{}
	waiting   int
	base      time.Duration
	perQueued time.Duration
	maxWait   time.Duration
	net       time.Duration // each way

	served, rejected int
	services         []time.Duration
}

func newPartner(workers int, base, perQueued, maxWait time.Duration) *partner {
	return &partner{workers: make(chan struct{}, workers), base: base, perQueued: perQueued, maxWait: maxWait, net: time.Millisecond}
}

// setWorkers changes the number of workers. Requests being served, or
// waiting, finish on the old ones.
func (p *partner) setWorkers(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.workers = make(chan struct{}, n)
}

func (p *partner) setBase(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.base = d
}

// do serves one request and returns its status.
func (p *partner) do() int {
	time.Sleep(p.net)
	p.mu.Lock()
	p.waiting++
	workers := p.workers
	p.mu.Unlock()
	timeout := time.NewTimer(p.maxWait)
	defer timeout.Stop()
	select {
	case workers <- struct{}{}:
	case <-timeout.C:
		p.mu.Lock()
		p.waiting--
		p.rejected++
		p.mu.Unlock()
		time.Sleep(p.net)
		return 503
	}
	p.mu.Lock()
	p.waiting--
	svc := p.base + time.Duration(p.waiting)*p.perQueued
	p.services = append(p.services, svc)
	p.mu.Unlock()
	time.Sleep(svc)
	p.mu.Lock()
	p.served++
	p.mu.Unlock()
	<-workers
	time.Sleep(p.net)
	return 200
}

// p99 is the 99th percentile of the service times so far.
func (p *partner) p99() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := slices.Clone(p.services)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)*99/100]
}

// replica sends a backlog to the partner through one Host, as the
// dispatcher does: it starts every attempt Acquire (or Take, when take)
// allows, wakes when told, and releases each attempt with its outcome. A
// 503'd webhook goes back into the backlog.
type replica struct {
	mu        sync.Mutex
	h         *Host
	p         *partner
	take      bool
	left      int
	delivered int
	timer     *time.Timer
	done      chan struct{}
	peak      int
}

func newReplica(l Limits, p *partner, n int) *replica {
	return &replica{h: New(l, time.Now()), p: p, left: n, done: make(chan struct{})}
}

func (r *replica) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pump()
}

func (r *replica) pump() {
	now := time.Now()
	for r.left > 0 {
		var ok bool
		var wake time.Time
		if r.take {
			ok, wake = r.h.Take(now)
		} else {
			ok, wake = r.h.Acquire(now)
		}
		if !ok {
			if !wake.IsZero() && r.timer == nil {
				r.timer = time.AfterFunc(wake.Sub(now), func() {
					r.mu.Lock()
					defer r.mu.Unlock()
					r.timer = nil
					r.pump()
				})
			}
			return
		}
		r.left--
		r.peak = max(r.peak, r.h.InFlight())
		go r.attempt(now)
	}
}

func (r *replica) attempt(sentAt time.Time) {
	status := r.p.do()
	r.mu.Lock()
	defer r.mu.Unlock()
	res := Result{Outcome: Success, SentAt: sentAt, Status: status}
	if status != 200 {
		res.Outcome = Failure
		r.left++
	} else {
		r.delivered++
	}
	r.h.Release(time.Now(), res)
	if r.left == 0 && r.h.InFlight() == 0 {
		close(r.done)
		return
	}
	r.pump()
}

// limit is the host's bound now.
func (r *replica) limit() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.h.Limit()
}

func (r *replica) why() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.h.State(time.Now()).ConcurrencyWhy
}

// run delivers every replica's backlog and returns how long it took and
// the limits seen every 100 ms (of the first replica).
func run(rs ...*replica) (took time.Duration, limits []int) {
	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				limits = append(limits, rs[0].limit())
			}
		}
	})
	for _, r := range rs {
		r.start()
	}
	for _, r := range rs {
		<-r.done
	}
	took = time.Since(start)
	close(stop)
	wg.Wait()
	return took, limits
}

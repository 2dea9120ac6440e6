package fleet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/internal/redistest"
	"github.com/hookpace/hookpace/pacer"
	"github.com/hookpace/hookpace/spool"
)

// The gates' tests run the real dispatcher on a real spool (Badger in
// t.TempDir()) against a real redis-server, in real time: the fleet's
// clock is Redis's, which a synctest bubble cannot fake. They assert
// bounds, never durations. The partner is in memory: a RoundTripper.

// partner answers every request (200 unless handle says otherwise) after
// work, records its arrivals, and counts how many it holds at once.
type partner struct {
	work   time.Duration
	handle func(r *http.Request, n int) (int, http.Header)

	mu        sync.Mutex
	got       []arrival
	now, most atomic.Int64
}

type arrival struct {
	at   time.Time
	host string
}

func (p *partner) RoundTrip(r *http.Request) (*http.Response, error) {
	io.Copy(io.Discard, r.Body)
	p.mu.Lock()
	p.got = append(p.got, arrival{time.Now(), r.URL.Host})
	n := len(p.got)
	p.mu.Unlock()
	in := p.now.Add(1)
	defer p.now.Add(-1)
	for m := p.most.Load(); in > m && !p.most.CompareAndSwap(m, in); m = p.most.Load() {
	}
	time.Sleep(p.work)
	status, h := 200, http.Header{}
	if p.handle != nil {
		status, h = p.handle(r, n)
	}
	return &http.Response{StatusCode: status, Header: h, Body: http.NoBody, Request: r}, nil
}

func (p *partner) arrivals(host string) []arrival {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []arrival
	for _, a := range p.got {
		if host == "" || a.host == host {
			out = append(out, a)
		}
	}
	return out
}

// maxPerWindow is the most arrivals within any window of w.
func maxPerWindow(as []arrival, w time.Duration) int {
	best, j := 0, 0
	for i := range as {
		for as[i].at.Sub(as[j].at) >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

func policy(rate float64, burst, conc int) deliver.Policy {
	return deliver.Policy{
		Limits: pacer.Limits{Rate: rate, Burst: burst, Concurrency: conc, Adaptive: true,
			HoldSchedule: []time.Duration{2 * time.Second, 5 * time.Second}, MaxRetryAfter: time.Minute,
			BreakerFailures: 5, BreakerCooldown: 30 * time.Second},
		Timeout: 10 * time.Second, MaxAttempts: 5, MaxAge: 72 * time.Hour,
		BackoffInitial: time.Second, BackoffMax: time.Minute, Retry4xx: []int{408, 425},
	}
}

// replica is one hookpace's delivery side: a dispatcher with the gates,
// its spool and its limiter.
type replica struct {
	d   *deliver.Dispatcher
	sp  *spool.Spool
	gs  *Gates
	lim *Limiter
}

type replicaOpts struct {
	lease, timeout time.Duration
	obs            Observer
	tokensFor      time.Duration
}

func startReplica(t *testing.T, srv *redistest.Server, name string, p *partner, pol deliver.Policy, o replicaOpts) *replica {
	t.Helper()
	o.lease, o.timeout = orDefault(o.lease, 3*time.Second), orDefault(o.timeout, time.Second)
	quiet := slog.New(slog.DiscardHandler)
	lim, err := New(Options{URL: srv.URL(), KeyPrefix: "t", Replica: name, Timeout: o.timeout,
		LeasePeriod: o.lease, Logger: quiet, Observer: o.obs})
	if err != nil {
		t.Fatal(err)
	}
	sp, err := openJournaled(spool.Options{Dir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	gs := NewGates(lim, quiet)
	if o.tokensFor > 0 {
		gs.tokensFor = o.tokensFor
	}
	d := deliver.New(deliver.Options{Reader: sp, Store: sp, Stats: sp, Journal: journalOf(sp), Policy: func(string) *deliver.Policy { return &pol },
		Client: &http.Client{Transport: p}, Logger: quiet, Gates: gs})
	lim.Start()
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()); lim.Close(); sp.Close() })
	return &replica{d: d, sp: sp, gs: gs, lim: lim}
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// add queues n webhooks for host, appended 16 at a time (they share
// commits).
func (r *replica) add(t *testing.T, host string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	slots := make(chan struct{}, 16)
	for i := range n {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			m := &spool.Message{Host: host, Method: "POST", URL: fmt.Sprintf("http://%s/hook/%d", host, i),
				Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{}`), Enqueued: time.Now()}
			if err := r.sp.Append(context.Background(), m, 0); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// left is how many webhooks the replica's spool still holds.
func (r *replica) left() int64 {
	var n int64
	for _, u := range r.sp.Hosts() {
		n += u.Messages
	}
	return n
}

// waitFor polls cond until it holds or limit passes (real time).
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

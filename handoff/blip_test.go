package handoff

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A receiver restarted mid-hand-off: after 30 webhooks it drops the
// connections of the next 10 requests unanswered and stops listening;
// it listens again (same address) when the sender first backs off. Every
// webhook is handed off, once each, each ordering key's in its order,
// and the connection errors were retried, not kept. The retries' waits
// go through the test's clock: nothing sleeps.
func TestReceiverRestartedMidHandoff(t *testing.T) {
	var mu sync.Mutex
	var got []got
	var n, dropped atomic.Int64
	var ln net.Listener
	var srv *http.Server
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) > 30 && dropped.Add(1) <= 10 {
			if dropped.Load() == 1 {
				ln.Close() // the pod goes: new connections are refused
			}
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				c.Close() // unanswered: the webhook was not stored here
			}
			return
		}
		mu.Lock()
		got = append(got, struct {
			requestURI, host, lineage, auth string
			header                          http.Header
			body                            string
		}{requestURI: r.RequestURI, host: r.Host, lineage: r.Header.Get(Header), header: r.Header.Clone()})
		mu.Unlock()
		accept(w, n.Load())
	})
	var err error
	if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	srv = &http.Server{Handler: handler}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	var restarted sync.Once
	var waits atomic.Int64
	sleep := func(ctx context.Context, d time.Duration) bool {
		waits.Add(1)
		restarted.Do(func() {
			// The pod is back, on the same address, before the retry.
			l, err := net.Listen("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			go srv.Serve(l)
		})
		return ctx.Err() == nil
	}
	sp := lanedSpool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour) // shutdown.timeout: the budget
	defer cancel()
	res, err := Run(ctx, Options{Target: "http://" + addr, Queue: sp, Concurrency: 8, Logger: quiet(), sleep: sleep})
	if err != nil {
		t.Fatal(err)
	}
	if res.Queued != 88 || res.HandedOff != 88 || res.Left != 0 || len(res.Kept) != 0 || res.Retried < 10 || dropped.Load() < 10 {
		t.Fatalf("result %+v after %d dropped: want all 88 handed off, the connection errors retried", res, dropped.Load())
	}
	seen := map[string]bool{}
	last := map[string]int{}
	for _, g := range got {
		if seen[g.lineage] {
			t.Fatalf("%s handed off twice", g.lineage)
		}
		seen[g.lineage] = true
		seq, _ := strconv.Atoi(g.header.Get("X-Seq"))
		if seq >= 100 {
			continue
		}
		key := g.host + "/" + g.header.Get("Hookpace-Ordering-Key")
		if prev, ok := last[key]; ok && prev >= seq {
			t.Fatalf("key %s: %d arrived after %d", key, seq, prev)
		}
		last[key] = seq
	}
	if len(seen) != 88 || len(last) != 8 {
		t.Fatalf("%d webhooks arrived, %d ordering keys", len(seen), len(last))
	}
}

// Without room in the budget past the margin, a connection error keeps
// the webhook at once.
func TestConnectionErrorPastBudget(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	sp := queued(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), retryMargin)
	defer cancel()
	var slept atomic.Bool
	res, err := Run(ctx, Options{Target: "http://" + addr, Queue: sp, Logger: quiet(),
		sleep: func(context.Context, time.Duration) bool { slept.Store(true); return true }})
	if err != nil {
		t.Fatal(err)
	}
	if slept.Load() || res.Kept["connection_error"] != 5 || res.Left != 5 {
		t.Fatalf("result %+v (slept %v): want the 5 kept at once", res, slept.Load())
	}
}

// A 503 with a Retry-After (a hookpace stopping, or full) is retried
// after it within the budget less the margin; one without, or past the
// budget, keeps the webhook.
func TestRetries503WithRetryAfter(t *testing.T) {
	tg := newTarget(t, func(w http.ResponseWriter, n int64) {
		if n <= 5 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		accept(w, n)
	})
	sp := queued(t, 10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	res, err := Run(ctx, Options{Target: tg.URL, Queue: sp, Concurrency: 1, Logger: quiet(),
		sleep: func(ctx context.Context, _ time.Duration) bool { return ctx.Err() == nil }})
	if err != nil {
		t.Fatal(err)
	}
	if res.HandedOff != 10 || res.Left != 0 || res.Retried != 5 {
		t.Fatalf("result %+v: want all 10 handed off after 5 retries", res)
	}
	busy := newTarget(t, func(w http.ResponseWriter, n int64) {
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	sp = queued(t, 3)
	res, err = Run(context.Background(), Options{Target: busy.URL, Queue: sp, Logger: quiet()}) // no budget: no wait
	if err != nil || res.Kept["status_503"] != 3 || res.Retried != 0 || busy.n.Load() != 3 {
		t.Fatalf("result %+v, %v after %d requests: want the 3 kept at once", res, err, busy.n.Load())
	}
}

package main

// The cost of idempotent enqueue: the proxy's handler on the
// real spool, with a unique Idempotency-Key on every request
// (BenchmarkIngestSpoolKeyed) against none (BenchmarkIngestSpool). Run
// them alternately, in one process each time:
//
//	go test -c -o /tmp/bench.test ./bench
//	for i in 1 2 3; do for b in IngestSpool IngestSpoolKeyed; do
//	  /tmp/bench.test -test.run '^$' -test.bench "^Benchmark$b\$" -test.benchtime 20000x; done; done

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/proxy"
)

func BenchmarkIngestSpoolKeyed(b *testing.B) {
	sp, cs := openSpoolStats(b)
	cfg := config.Default()
	pol := proxy.Policy{
		Host: func(string) proxy.HostPolicy {
			return proxy.HostPolicy{Connect: proxy.ConnectTunnel, DedupeWindow: cfg.Defaults.DedupeWindow.D()}
		},
		MaxBody:           int64(cfg.Spool.MaxBody),
		IdempotencyHeader: cfg.Dedupe.IdempotencyHeader,
	}
	px := benchProxy(b, sp, pol, "warn")
	body := makeBody()
	var seq atomic.Int64
	prefix := "evt_" + strconv.FormatInt(time.Now().UnixNano(), 36) + "_"
	b.SetParallelism(32) // as benchIngest
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:9/hook", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Idempotency-Key", prefix+strconv.FormatInt(seq.Add(1), 10))
			w := httptest.NewRecorder()
			px.ServeHTTP(w, r)
			if w.Code != http.StatusAccepted || w.Header().Get("X-Hookpace-Duplicate") != "" {
				b.Errorf("status %d (duplicate %q): %s", w.Code, w.Header().Get("X-Hookpace-Duplicate"), w.Body)
				return
			}
		}
	})
	reportRate(b, start)
	cs.report(b)
	if u := sp.Usage(); u.DedupeKeys != int64(b.N) && b.N > 1 {
		b.Errorf("%d keys remembered, want %d", u.DedupeKeys, b.N)
	}
}

package main

// The cost of a JSON rewrite rule at ingest: the proxy's handler with one
// rule that matches every webhook (mask $.id of the 1 KiB body) against
// the same handler without rules, on the real spool and on the stub one
// (the handler's CPU alone). Run them in alternating pairs, one process
// each (docs/performance.md, "Rewrite rules at ingest"):
//
//	go test -c -o /tmp/bench.test ./bench
//	for i in 1 2 3 4 5; do for b in IngestStubSpool IngestStubSpoolRewrite; do
//	  /tmp/bench.test -test.run '^$' -test.bench "^Benchmark$b\$" -test.benchtime 200000x; done; done

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/proxy"
	"github.com/hookpace/hookpace/rewrite"
)

func benchIngestRewrite(b *testing.B, sp proxy.Spooler, cs *commitStats) {
	cfg := config.Default()
	mask, err := rewrite.ParsePath("$.id")
	if err != nil {
		b.Fatal(err)
	}
	rules := &rewrite.JSON{Mask: []rewrite.Path{mask}}
	pol := proxy.Policy{
		Host: func(string) proxy.HostPolicy {
			return proxy.HostPolicy{Connect: proxy.ConnectTunnel, Rewrite: rules}
		},
		MaxBody: int64(cfg.Spool.MaxBody),
	}
	px := benchProxy(b, sp, pol, "warn")
	body := makeBody()
	b.SetParallelism(32) // as benchIngest
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:9/hook", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			px.ServeHTTP(w, r)
			if w.Code != http.StatusAccepted {
				b.Errorf("status %d: %s", w.Code, w.Body)
				return
			}
		}
	})
	reportRate(b, start)
	if cs != nil {
		cs.report(b)
	}
}

func BenchmarkIngestStubSpoolRewrite(b *testing.B) {
	s := &stubSpool{}
	benchIngestRewrite(b, s, nil)
}

func BenchmarkIngestSpoolRewrite(b *testing.B) {
	sp, cs := openSpoolStats(b)
	benchIngestRewrite(b, sp, cs)
}

// The rule does what it says on the bench's body: the bench measures
// real work.
func TestBenchRewriteMasks(t *testing.T) {
	mask, _ := rewrite.ParsePath("$.id")
	out, a, err := (&rewrite.JSON{Mask: []rewrite.Path{mask}}).Apply(makeBody())
	if err != nil || a.Masked != 1 || !bytes.Contains(out, []byte(`"id":"[masked]"`)) || len(out) < bodySize-20 {
		t.Fatalf("%v %+v %.80s", err, a, out)
	}
}

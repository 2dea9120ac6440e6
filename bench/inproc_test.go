package main

// In-process benchmarks that split hookpace's ingest cost into its layers,
// without sockets or a load generator in the way:
//
//	go test ./bench -run '^$' -bench . -benchtime 3s
//	go test ./bench -run '^$' -bench Ingest -cpuprofile /tmp/ingest.pprof
//
// Spool*: spool.Append alone (group commit + fsync), 1 and 64 writers.
// Ingest*: the proxy's handler (goproxy + hookpace's decision, metrics,
// logging) driven through ServeHTTP with a recorder; with the real spool, or
// with a stub spool that only assigns ids, which isolates the proxy layer.
// All of them use 1 KiB bodies; "msgs/s" is throughput over all goroutines.

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/proxy"
	"github.com/hookpace/hookpace/spool"
	"github.com/hookpace/hookpace/telemetry"
)

// commitStats counts the spool's group commits through its Notify
// listener, which the writer calls once per commit round with the messages
// made durable.
type commitStats struct{ rounds, msgs atomic.Int64 }

func (c *commitStats) report(b *testing.B) {
	if r := c.rounds.Load(); r > 0 {
		b.ReportMetric(float64(c.msgs.Load())/float64(r), "msgs/commit")
	}
}

func openSpoolStats(b *testing.B) (*spool.Spool, *commitStats) {
	b.Helper()
	cs := &commitStats{}
	dir, err := os.MkdirTemp(flags.workdir, "hookpace-inproc-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	log, _, _ := telemetry.NewLogger(io.Discard, "text", "warn")
	sp, err := spool.Open(spool.Options{Dir: dir, MaxMessages: 50_000_000, MaxBytes: 64 << 30, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	sp.Notify(func(ms []*spool.Message) {
		cs.rounds.Add(1)
		cs.msgs.Add(int64(len(ms)))
	})
	b.Cleanup(func() { sp.Close() })
	return sp, cs
}

func reportRate(b *testing.B, start time.Time) {
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

func benchAppend(b *testing.B, writers int) {
	sp, cs := openSpoolStats(b)
	body := makeBody()
	hdr := http.Header{"Content-Type": {"application/json"}}
	b.SetParallelism((writers + 1) / 2) // x GOMAXPROCS (2 here)
	if writers == 1 {
		b.SetParallelism(1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	run := func() error {
		m := &spool.Message{Host: "127.0.0.1:9", Method: "POST", URL: "http://127.0.0.1:9/hook",
			Header: hdr, Body: body, Enqueued: time.Now()}
		return sp.Append(context.Background(), m, 0)
	}
	if writers == 1 {
		for i := 0; i < b.N; i++ {
			if err := run(); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := run(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	reportRate(b, start)
	cs.report(b)
}

func BenchmarkSpoolAppend1(b *testing.B)   { benchAppend(b, 1) }
func BenchmarkSpoolAppend64(b *testing.B)  { benchAppend(b, 64) }
func BenchmarkSpoolAppend8(b *testing.B)   { benchAppend(b, 8) }
func BenchmarkSpoolAppend256(b *testing.B) { benchAppend(b, 256) }

// stubSpool accepts everything at once.
type stubSpool struct{ id atomic.Uint64 }

func (s *stubSpool) Append(_ context.Context, m *spool.Message, _ int64) error {
	m.ID = s.id.Add(1)
	return nil
}
func (s *stubSpool) AppendKeys(ctx context.Context, m *spool.Message, limit int64, _ spool.Keys) (spool.Appended, error) {
	return spool.Stored, s.Append(ctx, m, limit)
}
func (s *stubSpool) Full() *spool.FullError { return nil }

// KeyQueued: nothing stays queued.
func (s *stubSpool) KeyQueued(string, string) (queued, keys int) { return 0, 0 }

// openGuard allows every destination without resolving it.
type openGuard struct{}

func (openGuard) Check(context.Context, string) ([]netip.Addr, error) { return nil, nil }
func (openGuard) CheckPort(context.Context, string, uint16) ([]netip.Addr, error) {
	return nil, nil
}
func (openGuard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func benchIngest(b *testing.B, sp proxy.Spooler, cs *commitStats, level string) {
	cfg := config.Default()
	pol := proxy.Policy{
		Host:    func(string) proxy.HostPolicy { return proxy.HostPolicy{Connect: proxy.ConnectTunnel} },
		MaxBody: int64(cfg.Spool.MaxBody),
	}
	px := benchProxy(b, sp, pol, level)
	body := makeBody()
	b.SetParallelism(32) // 64 goroutines on 2 CPUs
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

// benchProxy is the proxy's handler on sp with pol, logging at level to
// nowhere, with real (unexported) telemetry.
func benchProxy(b *testing.B, sp proxy.Spooler, pol proxy.Policy, level string) *proxy.Proxy {
	log, _, err := telemetry.NewLogger(io.Discard, "text", level)
	if err != nil {
		b.Fatal(err)
	}
	tel, err := telemetry.Setup(context.Background(), telemetry.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tel.Shutdown(context.Background()) })
	return proxy.New(proxy.Options{Policy: pol, Spool: sp, Guard: openGuard{}, Transport: &http.Transport{},
		Logger: log, Metrics: tel.Metrics, Tracer: tel.Tracer, Prop: tel.Propagator})
}

func BenchmarkIngestStubSpool(b *testing.B)     { benchIngest(b, &stubSpool{}, nil, "warn") }
func BenchmarkIngestStubSpoolInfo(b *testing.B) { benchIngest(b, &stubSpool{}, nil, "info") }
func BenchmarkIngestSpool(b *testing.B) {
	sp, cs := openSpoolStats(b)
	benchIngest(b, sp, cs, "warn")
}

package fleet

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/internal/redistest"
	"github.com/hookpace/hookpace/pacer"
)

// BenchmarkAskOneHost: a replica with a backlog to one fast host, each ask
// releasing the 14 leases of the previous one and taking 14 more (the
// bench's one-host replay: ~14 deliveries per round trip). It reports
// redis-server's own time per script call (INFO commandstats).
func BenchmarkAskOneHost(b *testing.B) {
	benchAsk(b, 14)
}

// BenchmarkAskOneLease: one lease released and one taken per ask (the
// bench's 1,000-host replay).
func BenchmarkAskOneLease(b *testing.B) {
	benchAsk(b, 1)
}

func benchAsk(b *testing.B, k int) {
	srv := redistest.Start(b)
	l, err := New(Options{URL: srv.URL(), KeyPrefix: "b", Replica: "bench-replica-0123:4567"})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	lim := pacer.Limits{Rate: 1000000, Burst: 1000, Concurrency: 64}
	// 50 leases held by other attempts, as in a busy host.
	if _, err := l.Ask(ctx, Request{Host: "h", Limits: lim, Want: 50}); err != nil {
		b.Fatal(err)
	}
	var prev []string
	l.rdb.ConfigResetStat(ctx)
	b.ResetTimer()
	for range b.N {
		rel := make([]Release, len(prev))
		for i, id := range prev {
			rel[i] = Release{Lease: id, Outcome: pacer.Success}
		}
		g, err := l.Ask(ctx, Request{Host: "h", Limits: lim, Want: k, Releases: rel})
		if err != nil {
			b.Fatal(err)
		}
		prev = g.Leases
	}
	b.StopTimer()
	info, _ := l.rdb.Info(ctx, "commandstats").Result()
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "cmdstat_evalsha:") {
			f := strings.Split(line, ",")
			for _, kv := range f {
				if v, ok := strings.CutPrefix(kv, "usec_per_call="); ok {
					x, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
					b.ReportMetric(x, "redis-µs/call")
				}
			}
		}
	}
}

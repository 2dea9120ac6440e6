package deliver

import (
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"

	"github.com/hookpace/hookpace/spool"
)

// BenchmarkKeysMemory reports what the dispatcher holds per fairness key
// with work: 10,000 webhooks queued for a paused host under 10,000 keys,
// against the same under one key. It counts the lanes' bookkeeping and
// the one small message each key then holds in memory (one key holds a
// window of 32; the bound on what messages take, MaxBuffered, holds for
// both). Past maxLanes keys, the lanes held stay at maxLanes: 10,000
// keys cost about 285 B a key, 4,096 lanes' worth.
func BenchmarkKeysMemory(b *testing.B) {
	const n = 10000
	heap := func(keys int) uint64 {
		var used uint64
		synctest.Test(&testing.T{}, func(t *testing.T) {
			d, q := setup(t, &receiver{}, map[string]Policy{"p.example": policy(10, 1, 1)}, 64<<20)
			d.Pause("p.example")
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			q.addLaned("p.example", "k", n, func(i int, m *spool.Message) { m.Fairness = fmt.Sprint("tenant-", i%keys) })
			synctest.Wait()
			runtime.GC()
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			used = after.HeapAlloc - before.HeapAlloc
			runtime.KeepAlive(d)
		})
		return used
	}
	for range b.N {
		one, many := heap(1), heap(n)
		b.ReportMetric(float64(int64(many)-int64(one))/n, "B/key")
	}
}

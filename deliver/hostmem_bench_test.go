package deliver

import (
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

// BenchmarkIdlePlainHostMemory reports what the dispatcher keeps per
// plain host once its webhooks are delivered and it is idle, but not yet
// forgotten (IdleTTL): 5,000 hosts with a few webhooks each, the heap
// before and after. It counts the host, its gate and its window, and the
// test queue's empty map of the host.
func BenchmarkIdlePlainHostMemory(b *testing.B) {
	const n = 5000
	for range b.N {
		var used uint64
		synctest.Test(&testing.T{}, func(t *testing.T) {
			d, q := setup(t, &receiver{}, nil, 64<<20)
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			for i := range n {
				q.add(fmt.Sprint("h", i, ".example"), 3)
			}
			waitEmpty(t, q, time.Hour)
			time.Sleep(time.Second)
			synctest.Wait()
			runtime.GC()
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			used = after.HeapAlloc - before.HeapAlloc
			d.mu.Lock()
			if len(d.hosts) != n {
				t.Errorf("%d hosts known, want %d", len(d.hosts), n)
			}
			d.mu.Unlock()
		})
		b.ReportMetric(float64(used)/n, "B/host")
	}
}

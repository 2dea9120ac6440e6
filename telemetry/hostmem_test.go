package telemetry

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkHostEntryMemory reports what a host's metric entry keeps
// (B/host), for 5,000 hosts that each had one delivery outcome.
func BenchmarkHostEntryMemory(b *testing.B) {
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		es := make([]*hostEntry, 5000)
		for i := range es {
			es[i] = newHostEntry(fmt.Sprintf("10.0.%d.%d:8443", i/250, i%250))
			es[i].outcome(0)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(len(es)), "B/host")
		runtime.KeepAlive(es)
	}
}

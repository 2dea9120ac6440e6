package journal

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// BenchmarkDelivered is the spool's and the journal's work for webhooks
// delivered at once, as a replay does it: rounds of 64 appends, each
// delivered with its 200 recorded and removed without waiting
// (DeleteThen), product defaults. cpu-µs/webhook is the process's CPU
// (user and system) per webhook, which a loaded machine's scheduling
// does not inflate as it does the time.
func BenchmarkDelivered(b *testing.B) {
	s := openTest(b, b.TempDir(), testOpts{MaxBytes: 1 << 34})
	defer s.Close()
	j := journalOf(s)
	const round = 64
	body := bytes.Repeat([]byte("x"), 1<<10)
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := range b.N {
		var wg sync.WaitGroup
		for k := range round {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m := newMsg("h.example", i*round+k)
				m.Body = body
				if err := s.Append(context.Background(), m, 0); err != nil {
					b.Error(err)
					return
				}
				j.RecordAttempt(m, spool.Attempt{At: time.Now(), Duration: time.Millisecond, Status: 200,
					Header: http.Header{"Content-Length": {"0"}}, Batch: 1})
				wg.Add(1)
				s.DeleteThen([]*spool.Message{m}, func(error) { wg.Done() })
			}()
		}
		wg.Wait()
	}
	j.Sync()
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N*round), "cpu-µs/webhook")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package deliver

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// TestPriorityAfterPause: five low, then five high queued behind a pause;
// after the resume the high ones go first: nothing picked while the host
// could not send keeps its place ahead of them.
func TestPriorityAfterPause(t *testing.T) {
	for _, conc := range []int{1, 4} {
		synctest.Test(t, func(t *testing.T) {
			rc := &receiver{}
			d, q := setup(t, rc, map[string]Policy{"p.example": policy(100, 1, conc)}, 0)
			if err := d.Pause("p.example"); err != nil {
				t.Fatal(err)
			}
			q.addLaned("p.example", "low", 5, func(_ int, m *spool.Message) { m.Priority = spool.PriorityLow })
			time.Sleep(time.Second)
			synctest.Wait()
			q.addLaned("p.example", "high", 5, func(_ int, m *spool.Message) { m.Priority = spool.PriorityHigh })
			time.Sleep(time.Second)
			synctest.Wait()
			if n := len(rc.arrivals("")); n != 0 {
				t.Fatalf("%d sent while paused", n)
			}
			if _, err := d.Resume("p.example"); err != nil {
				t.Fatal(err)
			}
			waitEmpty(t, q, time.Minute)
			got := tags(rc.arrivals(""))
			want := []string{"high", "high", "high", "high", "high", "low", "low", "low", "low", "low"}
			if !slices.Equal(got, want) {
				t.Fatalf("concurrency %d: arrivals %v, want %v", conc, got, want)
			}
		})
	}
}

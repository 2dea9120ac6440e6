package deliver

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookpace/hookpace/pacer"
)

// A reload takes effect on a host that is waiting for a token: a host at
// the slowest rate config accepts (one per ten hours), or one given a rate
// beyond the bound, delivers its backlog at the new rate right after
// SetPolicy, not after the wait computed at the old rate.
func TestReloadReachesWaitingHost(t *testing.T) {
	for _, from := range []float64{pacer.RateMin, 1e308} {
		synctest.Test(t, func(t *testing.T) {
			rc := &receiver{}
			slow := policy(from, 1, 1)
			slow.Limits.Adaptive = false
			d, q := setup(t, rc, map[string]Policy{"partner.example": slow}, 0)
			q.add("partner.example", 20)
			time.Sleep(time.Second)
			synctest.Wait()
			before := len(rc.arrivals("partner.example"))
			if from == pacer.RateMin && before != 1 {
				t.Fatalf("at %g/s: %d arrivals in the first second, want the burst of 1", from, before)
			}
			d.SetPolicy(fixed(policy(10, 1, 1)))
			// 10/s from now: the rest within about two seconds.
			took := waitEmpty(t, q, 5*time.Second)
			if took > 2500*time.Millisecond {
				t.Errorf("from %g/s: the backlog took %v after the reload to 10/s", from, took)
			}
			if n := len(rc.arrivals("partner.example")); n != 20 {
				t.Errorf("from %g/s: %d arrivals, want 20", from, n)
			}
		})
	}
}

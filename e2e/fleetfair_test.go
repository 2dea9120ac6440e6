package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
)

// TestFleetFairShares: two replicas with 300 webhooks each for one
// partner that takes 8 at once and answers in 50 ms, fast enough a host
// (1000/s, burst 100) that a replica keeps its leases for its next
// webhooks. Neither holds every slot while the other waits: when the
// first has delivered all of its own, the other has at most 150 left
// (it had 300 left when the issue was found).
func TestFleetFairShares(t *testing.T) {
	// Alone, not in parallel: see "Fleet bounds" in harness_test.go.
	srv := redistest.Start(t)
	rc := newSlowPartner(t, 50*time.Millisecond)
	hps := startFleet(t, srv, 2, fmt.Sprintf(`"%s": {rate: 1000/s, burst: 100, concurrency: 8}`, rc.Host()))
	if out, err := hps[0].CLI("pause", rc.Host()); err != nil {
		t.Fatalf("hookpace pause: %v\n%s", err, out)
	}
	postSpread(t, hps, rc.Receiver, "fair", 600)
	for _, hp := range hps {
		Poll(t, 30*time.Second, "300 queued", func() bool { return hostOf(t, hp, rc.Host()).Queued == 300 })
	}
	resumed := time.Now()
	if out, err := hps[1].CLI("resume", rc.Host()); err != nil {
		t.Fatalf("hookpace resume: %v\n%s", err, out)
	}
	var left [2]int
	Poll(t, 60*time.Second, "one replica done", func() bool {
		for i, hp := range hps {
			h := hostOf(t, hp, rc.Host())
			left[i] = h.Queued + h.InFlight
		}
		return left[0] == 0 || left[1] == 0
	})
	t.Logf("when one replica was done, the other had %d left (queued and in flight)", max(left[0], left[1]))
	if max(left[0], left[1]) > 150 {
		t.Fatalf("%d left at the other replica of its 300: it did not get its share of the slots", max(left[0], left[1]))
	}
	fleetCheckOnce(t, rc.Receiver, "fair", 600, 60*time.Second)
	t.Logf("600 delivered %v after the resume (8 at once for 50 ms each: 3.75 s at best)", time.Since(resumed).Round(10*time.Millisecond))
	if m := rc.mostAtOnce(); m > 8 {
		t.Fatalf("%d at once, cap 8", m)
	}
}

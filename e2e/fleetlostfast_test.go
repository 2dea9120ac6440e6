package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
)

// Three replicas drain 1,500 webhooks at rate 200/s, burst 20,
// concurrency 8, to a partner that answers in 20 ms, and Redis is killed
// and restarted empty once 400 have arrived: the busiest second stays
// within B + R·1s = 220 and at most 8 are in flight at once, each webhook
// arrives once, and afterwards every replica paces the host shared again,
// none on a local share, and one replica alone gets the whole rate.
func TestFleetRedisRestartedEmptyFast(t *testing.T) {
	// Alone, not in parallel: see "Fleet bounds" in harness_test.go.
	busyNode(t)
	srv := redistest.Start(t)
	rc := newSlowPartner(t, 20*time.Millisecond)
	hps := startFleet(t, srv, 3, fmt.Sprintf(`"%s": {rate: 200/s, burst: 20, concurrency: 8}`, rc.Host()))
	const n = 1500
	postSpread(t, hps, rc.Receiver, "fast", n)
	mine := func(a Arrival) bool { return strings.HasPrefix(a.Path, "/fast/") }
	rc.WaitFor(t, 60*time.Second, "400 webhooks", func([]Arrival) bool { return rc.Count(mine) >= 400 })
	killed := time.Now()
	srv.Kill()
	srv.Restart()
	fleetCheckOnce(t, rc.Receiver, "fast", n, 90*time.Second)
	most, m := busiestSecond(rc.Arrivals()), rc.mostAtOnce()
	t.Logf("redis restarted empty at 200/s: busiest second %d (%d by the handler's clock), most at once %d", most, busiestSecond(rc.handlerArrivals()), m)
	if most > 220 {
		t.Errorf("%d arrivals in one second, bound 220 (%s)\n%s", most, degradedLogs(hps), tenths(rc.Arrivals(), killed))
	}
	if m > 8 {
		t.Errorf("%d at once, cap 8", m)
	}
	for i, hp := range hps {
		Poll(t, 30*time.Second, fmt.Sprintf("r%d's host shared again", i+1), func() bool {
			h := hostOf(t, hp, rc.Host())
			return h.Fleet == "shared" && !fleetOf(t, hp).Degraded
		})
	}
	// One replica alone now has the whole rate, not a third of it (67/s).
	PostAll(t, hps[0], 600, 16, func(i int) string { return fmt.Sprintf("%s/solo/%d", rc.URL, i) })
	fleetCheckOnce(t, rc.Receiver, "solo", 600, 60*time.Second)
	var solo []Arrival
	for _, a := range rc.Arrivals() {
		if strings.HasPrefix(a.Path, "/solo/") {
			solo = append(solo, a)
		}
	}
	if most := busiestSecond(solo); most < 120 {
		t.Errorf("one replica alone after the restart: busiest second %d, want near 200 (at least 120)", most)
	}
}

package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
)

// TestFleetRedisRestartedEmpty: three replicas
// drain 300 webhooks to a fast partner at 20/s, burst 10, concurrency 10,
// and Redis is killed and restarted empty when a third have arrived. The
// replicas pace on their shares until it answers, then find every host's
// state lost and restore what they remember (the bucket's debt, their
// leases): the busiest second stays within B + R·W = 30, and at most 10
// are in flight at once; each webhook arrives once.
func TestFleetRedisRestartedEmpty(t *testing.T) {
	// Alone, not in parallel: see "Fleet bounds" in harness_test.go.
	busyNode(t)
	srv := redistest.Start(t)
	rc := newSlowPartner(t, 5*time.Millisecond)
	hps := startFleet(t, srv, 3, fmt.Sprintf(`"%s": {rate: 20/s, burst: 10, concurrency: 10}`, rc.Host()))
	postSpread(t, hps, rc.Receiver, "lost", 300)
	mine := func(a Arrival) bool { return strings.HasPrefix(a.Path, "/lost/") }
	rc.WaitFor(t, 60*time.Second, "100 webhooks", func([]Arrival) bool { return rc.Count(mine) >= 100 })
	killed := time.Now()
	srv.Kill()
	srv.Restart()
	fleetCheckOnce(t, rc.Receiver, "lost", 300, 90*time.Second)
	n, m := busiestSecond(rc.Arrivals()), rc.mostAtOnce()
	t.Logf("redis restarted empty: busiest second %d (%d by the handler's clock), most at once %d", n, busiestSecond(rc.handlerArrivals()), m)
	if n > 30 {
		at := busiestAt(rc.Arrivals())
		t.Fatalf("%d arrivals in one second, bound 30, from %v after the kill (%s)\n%s", n, at.Sub(killed).Round(time.Millisecond),
			degradedLogs(hps), tenths(rc.Arrivals(), at.Add(2*time.Second)))
	}
	if m > 10 {
		t.Fatalf("%d at once, cap 10", m)
	}
}

// busiestAt is when the busiest second of as starts.
func busiestAt(as []Arrival) time.Time {
	ts := make([]time.Time, len(as))
	for i, a := range as {
		ts[i] = a.At
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	best, at, j := 0, time.Time{}, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= time.Second {
			j++
		}
		if i-j+1 > best {
			best, at = i-j+1, ts[j]
		}
	}
	return at
}

// tenths is how many arrived in each tenth of a second, from 2 s before
// k to 3 s after, for a failure's message.
func tenths(as []Arrival, k time.Time) string {
	var b strings.Builder
	for i := -20; i < 30; i++ {
		from := k.Add(time.Duration(i) * 100 * time.Millisecond)
		n := 0
		for _, a := range as {
			if !a.At.Before(from) && a.At.Before(from.Add(100*time.Millisecond)) {
				n++
			}
		}
		fmt.Fprintf(&b, "%+.1fs %d\n", float64(i)/10, n)
	}
	return b.String()
}

// TestFleetRedisFrozen: 500 webhooks the same way, with Redis frozen
// (SIGSTOP) once 100 have arrived, until every replica has paced on its
// share and 200 more have arrived (about 10 s at 20/s), then thawed
// (SIGCONT): the bucket that filled meanwhile is charged with what the
// shares may have sent, so the busiest second stays within 30 and at
// most 10 are in flight at once, through the freeze and after it; each
// webhook arrives once.
func TestFleetRedisFrozen(t *testing.T) {
	// Alone, not in parallel: see "Fleet bounds" in harness_test.go.
	srv := redistest.Start(t)
	rc := newSlowPartner(t, 5*time.Millisecond)
	hps := startFleet(t, srv, 3, fmt.Sprintf(`"%s": {rate: 20/s, burst: 10, concurrency: 10}`, rc.Host()))
	postSpread(t, hps, rc.Receiver, "frozen", 500)
	mine := func(a Arrival) bool { return strings.HasPrefix(a.Path, "/frozen/") }
	rc.WaitFor(t, 60*time.Second, "100 webhooks", func([]Arrival) bool { return rc.Count(mine) >= 100 })
	frozen := time.Now()
	srv.Freeze()
	for _, hp := range hps {
		Poll(t, 30*time.Second, "every replica on its share", func() bool { return fleetOf(t, hp).Degraded })
	}
	rc.WaitFor(t, 60*time.Second, "300 webhooks", func([]Arrival) bool { return rc.Count(mine) >= 300 })
	srv.Thaw()
	fleetCheckOnce(t, rc.Receiver, "frozen", 500, 90*time.Second)
	n, m := busiestSecond(rc.Arrivals()), rc.mostAtOnce()
	t.Logf("redis frozen: busiest second %d, most at once %d", n, m)
	if n > 30 {
		t.Fatalf("%d arrivals in one second, bound 30\n%s", n, tenths(rc.Arrivals(), frozen))
	}
	if m > 10 {
		t.Fatalf("%d at once, cap 10", m)
	}
	for _, hp := range hps {
		Poll(t, 30*time.Second, "shared again", func() bool { return !fleetOf(t, hp).Degraded })
	}
}

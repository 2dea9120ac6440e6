package e2e

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
)

// TestFleetFastHostBound: three replicas with a backlog to a fast partner
// (1000/s, burst 100, concurrency 8), where each replica may keep leases
// and take tokens ahead (4 each: see fleet.Reserve), stay within B + R·W
// at the partner and within the concurrency, and deliver each webhook once.
func TestFleetFastHostBound(t *testing.T) {
	// Alone, not in parallel: see "Fleet bounds" in harness_test.go.
	srv := redistest.Start(t)
	rc := newSlowPartner(t, 5*time.Millisecond)
	hps := startFleet(t, srv, 3, fmt.Sprintf(`"%s": {rate: 1000/s, burst: 100, concurrency: 8}`, rc.Host()))
	if out, err := hps[0].CLI("pause", rc.Host()); err != nil {
		t.Fatalf("hookpace pause: %v\n%s", err, out)
	}
	postSpread(t, hps, rc.Receiver, "fast", 1500)
	for _, hp := range hps {
		Poll(t, 30*time.Second, "all queued", func() bool { return hostOf(t, hp, rc.Host()).Queued == 500 })
	}
	if out, err := hps[1].CLI("resume", rc.Host()); err != nil {
		t.Fatalf("hookpace resume: %v\n%s", err, out)
	}
	fleetCheckOnce(t, rc.Receiver, "fast", 1500, 90*time.Second)
	as := rc.Arrivals()
	ts := make([]time.Time, len(as))
	for i, a := range as {
		ts[i] = a.At
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	for _, w := range []time.Duration{50 * time.Millisecond, 200 * time.Millisecond, time.Second} {
		bound := 100 + int(1000*w.Seconds())
		n := maxWindow(ts, w)
		t.Logf("busiest %v: %d (bound %d)", w, n, bound)
		if n > bound {
			t.Fatalf("%d arrivals in %v, bound %d (%s)", n, w, bound, degradedLogs(hps))
		}
	}
	if m := rc.mostAtOnce(); m > 8 {
		t.Fatalf("%d at once, cap 8 (%s)", m, degradedLogs(hps))
	}
}

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
)

// TestFleetOnCluster: on a real three-master Redis
// Cluster: three replicas naming its nodes in fleet.cluster, 300 webhooks
// to a 50 ms partner at 20/s, burst 10, concurrency 4: each arrives once,
// at most 30 in any second and 4 at once.
func TestFleetOnCluster(t *testing.T) {
	// Alone, not in parallel: see "Fleet bounds" in harness_test.go.
	c := redistest.StartCluster(t, 3)
	rc := newSlowPartner(t, 50*time.Millisecond)
	const n = 3
	var hps []*Hookpace
	for i := range n {
		hps = append(hps, Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
fleet: {cluster: ["%s"], replica: r%d, lease_period: 3s, timeout: 900ms}
hosts:
  "%s": {rate: 20/s, burst: 10, concurrency: 4}
`, strings.Join(c.Addrs(), `", "`), i+1, rc.Host())))
	}
	for _, hp := range hps {
		Poll(t, 10*time.Second, "3 live replicas", func() bool { return fleetOf(t, hp).Live == n })
	}

	postSpread(t, hps, rc.Receiver, "cluster", 300)
	fleetCheckOnce(t, rc.Receiver, "cluster", 300, 60*time.Second)
	as := rc.Arrivals()
	t.Logf("cluster: busiest second %d, most at once %d", busiestSecond(as), rc.mostAtOnce())
	if n := busiestSecond(as); n > 30 {
		t.Fatalf("%d arrivals in one second, bound 30 (%s)", n, degradedLogs(hps))
	}
	if m := rc.mostAtOnce(); m > 4 {
		t.Fatalf("%d at once, cap 4 (%s)", m, degradedLogs(hps))
	}
	for _, hp := range hps {
		if f := fleetOf(t, hp); f.Degraded {
			t.Fatalf("fleet on the cluster degraded: %+v (%s)", f, degradedLogs(hps))
		}
	}
	if h := hostOf(t, hps[0], rc.Host()); h.Fleet != "shared" || h.FleetInFlight == nil {
		t.Fatalf("/v1/hosts: %+v", h)
	}
	if !strings.Contains(hps[0].Log(), "cluster 127.0.0.1:") {
		t.Fatalf("want the cluster named in the log:\n%s", hps[0].Log())
	}
}

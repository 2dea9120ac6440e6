package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
)

// TestFleetOnSentinel: three replicas on a real Sentinel-managed master
// (a master, a replica, a sentinel) deliver 300 webhooks to a 50 ms
// partner at 20/s, burst 10, concurrency 4, and the master is killed
// when a third has arrived: the replicas pace on their shares until the
// sentinel promotes the replica, then share its limits again; each
// webhook arrives once, at most 30 in any second and 4 at once.
func TestFleetOnSentinel(t *testing.T) {
	// Alone, not in parallel: see "Fleet bounds" in harness_test.go.
	st := redistest.StartSentinel(t)
	rc := newSlowPartner(t, 50*time.Millisecond)
	const n = 3
	var hps []*Hookpace
	for i := range n {
		hps = append(hps, Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
fleet: {sentinel: {master: %s, addrs: ["%s"]}, replica: r%d, lease_period: 3s, timeout: 900ms}
hosts:
  "%s": {rate: 20/s, burst: 10, concurrency: 4}
`, st.Name, strings.Join(st.Addrs(), `", "`), i+1, rc.Host())))
	}
	for _, hp := range hps {
		Poll(t, 10*time.Second, "3 live replicas", func() bool { return fleetOf(t, hp).Live == n })
	}

	postSpread(t, hps, rc.Receiver, "sentinel", 300)
	mine := func(a Arrival) bool { return strings.HasPrefix(a.Path, "/sentinel/") }
	rc.WaitFor(t, 60*time.Second, "100 webhooks", func([]Arrival) bool { return rc.Count(mine) >= 100 })
	st.KillMaster()
	fleetCheckOnce(t, rc.Receiver, "sentinel", 300, 90*time.Second)
	// The promoted replica may lack the master's last writes, and its
	// bucket filled while the replicas paced on their shares: each replica
	// restores what it remembers (fleet/recall.go), so the bound holds.
	busiest, most := busiestSecond(rc.Arrivals()), rc.mostAtOnce()
	t.Logf("sentinel failover: busiest second %d, most at once %d", busiest, most)
	if busiest > 30 {
		t.Fatalf("%d arrivals in one second through the failover, bound 30 (%s)", busiest, degradedLogs(hps))
	}
	if most > 4 {
		t.Fatalf("%d at once through the failover, cap 4", most)
	}
	for _, hp := range hps {
		Poll(t, 30*time.Second, "shared again on the new master", func() bool {
			f := fleetOf(t, hp)
			return !f.Degraded && f.Live == n
		})
	}
	if h := hostOf(t, hps[0], rc.Host()); h.Fleet != "shared" || h.FleetInFlight == nil {
		t.Fatalf("/v1/hosts after the failover: %+v", h)
	}
	if !strings.Contains(hps[0].Log(), "sentinel "+st.Name+"@127.0.0.1:") {
		t.Fatalf("want the sentinel named in the log:\n%s", hps[0].Log())
	}
}

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// On a Redis Cluster, a failed master degrades only the hosts
// in its slots. Two real replicas on a real three-master Cluster (that
// serves the live masters' slots when one fails:
// cluster-require-full-coverage no), two partners, one whose keys live on
// the master the test kills mid-run: /v1/hosts says that one paces on a
// local share while the other is still shared, the fleet's state names
// it, each replica logs it once, and every webhook of both arrives once,
// the shared one within its bound.
func TestFleetClusterMasterDown(t *testing.T) {
	// Alone, not in parallel: see "Fleet bounds" in harness_test.go.
	c := redistest.StartCluster(t, 3)
	ctx := context.Background()
	for _, n := range c.Nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr()})
		if err := rc.ConfigSet(ctx, "cluster-require-full-coverage", "no").Err(); err != nil {
			t.Fatal(err)
		}
		rc.Close()
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer cc.Close()
	master := func(key string) string {
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return m.Options().Addr
	}
	keep := master("{hookpace}:replicas") // the heartbeat's master stays
	var up, down *Receiver
	for up == nil || down == nil {
		rc := NewReceiver(t)
		if master("{hookpace:"+rc.Host()+"}:tat") == keep {
			up = cmpRc(up, rc)
		} else {
			down = cmpRc(down, rc)
		}
	}
	kill := master("{hookpace:" + down.Host() + "}:tat")
	var hps []*Hookpace
	for i := range 2 {
		hps = append(hps, Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
fleet: {cluster: ["%s"], replica: r%d, lease_period: 3s, timeout: 500ms}
hosts:
  "%s": {rate: 20/s, burst: 5, concurrency: 2}
  "%s": {rate: 20/s, burst: 5, concurrency: 2}
`, strings.Join(c.Addrs(), `", "`), i+1, up.Host(), down.Host())))
	}
	for _, hp := range hps {
		Poll(t, 10*time.Second, "2 live replicas", func() bool { return fleetOf(t, hp).Live == 2 })
	}
	for _, n := range c.Nodes {
		if n.Addr() == kill {
			n.Kill()
		}
	}
	postSpread(t, hps, up, "up", 100)
	postSpread(t, hps, down, "down", 100)
	for _, hp := range hps {
		Poll(t, 20*time.Second, "the down master's host on a local share, the other shared", func() bool {
			d, u := hostOf(t, hp, down.Host()), hostOf(t, hp, up.Host())
			return strings.HasPrefix(d.Fleet, "degraded") && u.Fleet == "shared" && u.Queued > 0
		})
		if f := fleetOf(t, hp); f.Degraded || !strings.Contains(f.State, down.Host()) || strings.Contains(f.State, up.Host()) {
			t.Fatalf("fleet state %+v, want shared but for %s", f, down.Host())
		}
	}
	fleetCheckOnce(t, up, "up", 100, 60*time.Second)
	fleetCheckOnce(t, down, "down", 100, 60*time.Second)
	if n := busiestSecond(up.Arrivals()); n > 25 {
		t.Fatalf("the shared host: %d arrivals in one second, bound 25", n)
	}
	for i, hp := range hps {
		if n := strings.Count(hp.Log(), "fleet degraded in part"); n != 1 {
			t.Fatalf("r%d logged the partial outage %d times, want once:\n%s", i+1, n, hp.Log())
		}
		if strings.Contains(hp.Log(), "fleet degraded: redis") {
			t.Fatalf("r%d degraded as a whole:\n%s", i+1, hp.Log())
		}
	}
}

func cmpRc(a, b *Receiver) *Receiver {
	if a != nil {
		return a
	}
	return b
}

package fleet

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
	"github.com/hookpace/hookpace/pacer"
	"github.com/redis/go-redis/v9"
)

func newClusterLimiter(t *testing.T, c *redistest.Cluster, clk *clock, replica string) *Limiter {
	t.Helper()
	l, err := New(Options{Cluster: c.Addrs(), KeyPrefix: "t", Replica: replica, Now: clk.Now,
		Timeout: 2 * time.Second, LeasePeriod: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestClusterSharedLimits has two replicas on a real three-master Redis
// Cluster ask for 20 hosts at once (one pipeline across the masters, one
// script per host in its own slot): no host's sends exceed its burst and
// rate in any window, nor its concurrency across both.
func TestClusterSharedLimits(t *testing.T) {
	c, clk := redistest.StartCluster(t, 3), newClock()
	rs := []*Limiter{newClusterLimiter(t, c, clk, "a"), newClusterLimiter(t, c, clk, "b")}
	ctx := context.Background()
	l := pacer.Limits{Rate: 20, Burst: 10, Concurrency: 4}
	hosts := make([]string, 20)
	masters := map[string]bool{}
	for i := range hosts {
		hosts[i] = "partner-" + strconv.Itoa(i) + ".example"
		m, err := rs[0].rdb.(*redis.ClusterClient).MasterForKey(ctx, rs[0].key(hosts[i], "tat"))
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr] = true
	}
	if len(masters) < 2 {
		t.Fatalf("20 hosts on %d masters: want them spread", len(masters))
	}
	for _, r := range rs {
		if err := r.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, live, _ := rs[0].State(); live != 1 {
		t.Fatalf("live %d before b's heartbeat was seen by a", live)
	}
	if err := rs[0].Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if _, live, _ := rs[0].State(); live != 2 {
		t.Fatalf("live %d, want 2", live)
	}

	type lease struct {
		id    string
		until time.Time
	}
	held := make([]map[string][]lease, 2) // replica -> host -> leases
	for i := range held {
		held[i] = map[string][]lease{}
	}
	sends := map[string][]time.Duration{}
	start := clk.Now()
	for step := 0; clk.Now().Sub(start) < 3*time.Second; step++ {
		r := step % 2
		reqs := make([]Request, len(hosts))
		for i, h := range hosts {
			reqs[i] = Request{Host: h, Limits: l, Want: 3}
			var keep []lease
			for _, ls := range held[r][h] {
				if ls.until.After(clk.Now()) {
					keep = append(keep, ls)
					continue
				}
				reqs[i].Releases = append(reqs[i].Releases, Release{Lease: ls.id, Outcome: pacer.Success, Age: 50 * time.Millisecond})
			}
			held[r][h] = keep
		}
		grants, err := rs[r].AskMany(ctx, reqs)
		if err != nil {
			t.Fatalf("ask: %v", err)
		}
		for i, h := range hosts {
			for _, id := range grants[i].Leases {
				held[r][h] = append(held[r][h], lease{id, clk.Now().Add(50 * time.Millisecond)})
				sends[h] = append(sends[h], clk.Now().Sub(start))
			}
			if n := len(held[0][h]) + len(held[1][h]); n > l.Concurrency {
				t.Fatalf("%s: %d leases held across the replicas, cap %d", h, n, l.Concurrency)
			}
			if grants[i].InFlight > l.Concurrency {
				t.Fatalf("%s: fleet in flight %d", h, grants[i].InFlight)
			}
		}
		clk.Add(10 * time.Millisecond)
	}
	for _, h := range hosts {
		s := sends[h]
		if len(s) < 50 {
			t.Fatalf("%s: only %d sends in 3 s at 20/s burst 10", h, len(s))
		}
		for _, w := range []time.Duration{100 * time.Millisecond, time.Second} {
			bound := 10 + int(20*w.Seconds())
			for i := range s {
				n := 0
				for j := i; j < len(s) && s[j]-s[i] < w; j++ {
					n++
				}
				if n > bound {
					t.Fatalf("%s: %d sends in %v from %v, bound %d", h, n, w, s[i], bound)
				}
			}
		}
	}

	// Pause (a MULTI of one host's keys) and renewals work on the cluster too.
	if err := rs[1].Pause(ctx, hosts[3]); err != nil {
		t.Fatal(err)
	}
	st, err := rs[0].PauseStates(ctx, hosts[:5])
	if err != nil || st[3] != Paused || st[2] != PauseUnknown {
		t.Fatalf("pause states %v, %v", st, err)
	}
	if err := rs[0].Resume(ctx, hosts[3]); err != nil {
		t.Fatal(err)
	}
	if st, err := rs[1].PauseStates(ctx, hosts[3:4]); err != nil || st[0] != Resumed {
		t.Fatalf("pause states after resume %v, %v", st, err)
	}
	for h, ls := range held[0] {
		ids := make([]string, len(ls))
		for i, x := range ls {
			ids[i] = x.id
		}
		if err := rs[0].Renew(ctx, h, ids); err != nil {
			t.Fatalf("renew %s: %v", h, err)
		}
	}
}

// TestSentinelFailover has a limiter on a real Sentinel-managed master:
// the master is killed, the sentinel promotes the replica, and the
// limiter follows it, with the leases the replica received.
func TestSentinelFailover(t *testing.T) {
	st, clk := redistest.StartSentinel(t), newClock()
	l, err := New(Options{SentinelMaster: st.Name, SentinelAddrs: st.Addrs(), KeyPrefix: "t", Replica: "a",
		Now: clk.Now, Timeout: 2 * time.Second, LeasePeriod: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ctx := context.Background()
	lm := pacer.Limits{Rate: 1000, Burst: 100, Concurrency: 3}
	g := ask(t, l, lm, 3)
	if len(g.Leases) != 3 {
		t.Fatalf("before the failover: %+v", g)
	}
	first := g.Leases
	// The replica has the leases before the master dies (replication is
	// asynchronous: a failover may lose the last writes, as the README says).
	if n, err := l.rdb.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT: %d replicas, %v", n, err)
	}
	st.KillMaster()

	deadline := time.Now().Add(30 * time.Second)
	for {
		g, err = l.Ask(ctx, Request{Host: "partner.example", Limits: lm, Want: 1})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer after the failover: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(g.Leases) != 0 || g.InFlight != 3 || g.Reason != "concurrency" {
		t.Fatalf("after the failover: %+v, want the 3 leases kept", g)
	}
	if err := l.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if deg, _, _ := l.State(); deg {
		t.Fatal("still degraded after the failover")
	}
	if g := ask(t, l, lm, 2, Release{Lease: first[0], Outcome: pacer.Success}); len(g.Leases) != 1 || g.InFlight != 3 {
		t.Fatalf("after a release on the new master: %+v, want its slot", g)
	}
}

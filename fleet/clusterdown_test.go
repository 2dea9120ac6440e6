package fleet

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/internal/redistest"
	"github.com/hookpace/hookpace/pacer"
	"github.com/hookpace/hookpace/spool"
	"github.com/redis/go-redis/v9"
)

// partialCluster starts a three-master Cluster that keeps answering for
// the slots of its live masters when one fails (a Cluster without
// replicas otherwise refuses every command once a master is marked
// failed: cluster-require-full-coverage, see the README), and picks a
// master to stop that does not hold the fleet's replica list, with a host
// on it (down) and one on another master (up).
func partialCluster(t *testing.T, l *Limiter, c *redistest.Cluster) (kill int, up, down string) {
	t.Helper()
	ctx := context.Background()
	for _, n := range c.Nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr()})
		if err := rc.ConfigSet(ctx, "cluster-require-full-coverage", "no").Err(); err != nil {
			t.Fatal(err)
		}
		rc.Close()
	}
	cc := l.rdb.(*redis.ClusterClient)
	master := func(key string) int {
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range c.Nodes {
			if n.Addr() == m.Options().Addr {
				return i
			}
		}
		t.Fatalf("%s on %s, not a node", key, m.Options().Addr)
		return -1
	}
	kill = (master(l.replicasKey()) + 1) % len(c.Nodes)
	for i := 0; up == "" || down == ""; i++ {
		h := "partner-" + strconv.Itoa(i) + ".example"
		if master(l.key(h, "tat")) == kill {
			down = cmpOr(down, h)
		} else {
			up = cmpOr(up, h)
		}
	}
	return kill, up, down
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestClusterMasterDownDegradesItsSlotsOnly stops one master of a real
// three-master Cluster: in the same batch of asks, the host on a live
// master is granted its lease (shared) while the host on the stopped one
// fails and degrades alone; the limiter as a whole is not degraded. Its
// later asks are not sent while the slot is down, and once the master is
// back (empty) the heartbeat's probe brings the host back to shared
// limits, where the ask finds its state lost and restores it.
func TestClusterMasterDownDegradesItsSlotsOnly(t *testing.T) {
	c, clk := redistest.StartCluster(t, 3), newClock()
	l := newClusterLimiter(t, c, clk, "a")
	kill, up, down := partialCluster(t, l, c)
	ctx := context.Background()
	// keySlot is Redis's: its test vector, and the server's own answers.
	if s := keySlot("123456789"); s != 12739 {
		t.Fatalf("keySlot(123456789) = %d, want 12739", s)
	}
	for _, k := range []string{l.key(up, "tat"), l.key(down, "state"), l.replicasKey(), "{}x", "{a}b{c}", "no-tag", "{{x}}"} {
		want, err := l.rdb.ClusterKeySlot(ctx, k).Result()
		if err != nil || int64(keySlot(k)) != want {
			t.Fatalf("keySlot(%q) = %d, redis says %d (%v)", k, keySlot(k), want, err)
		}
	}
	lm := pacer.Limits{Rate: 1000, Burst: 100, Concurrency: 10}
	reqs := []Request{{Host: up, Limits: lm, Want: 1}, {Host: down, Limits: lm, Want: 1}}
	if _, errs := l.AskEach(ctx, reqs); errs[0] != nil || errs[1] != nil {
		t.Fatalf("before: %v", errs)
	}
	if err := l.Resume(ctx, up); err != nil {
		t.Fatal(err)
	}

	c.Nodes[kill].Kill()
	grants, errs := l.AskEach(ctx, reqs)
	if errs[0] != nil || len(grants[0].Leases) != 1 || grants[0].InFlight != 2 {
		t.Fatalf("host on a live master: %+v, %v; want its lease, shared", grants[0], errs[0])
	}
	if errs[1] == nil {
		t.Fatalf("host on the stopped master answered: %+v", grants[1])
	}
	if l.HostDegraded(up) || !l.HostDegraded(down) {
		t.Fatalf("degraded: %s %v, %s %v; want only the second", up, l.HostDegraded(up), down, l.HostDegraded(down))
	}
	if deg, _, _ := l.State(); deg {
		t.Fatal("the whole limiter is degraded")
	}
	if n, why := l.SlotsDown(); n != 1 || why == "" {
		t.Fatalf("slots down %d (%q), want 1", n, why)
	}
	if st, err := l.PauseStates(ctx, []string{up, down}); err != nil || st[0] != Resumed || st[1] != PauseNoAnswer {
		t.Fatalf("pause states %v, %v; want the live one's, no answer for the other", st, err)
	}
	if _, err := l.AskMany(ctx, reqs); err == nil {
		t.Fatal("AskMany hid the down host's error")
	}
	grants, errs = l.AskEach(ctx, reqs)
	if errs[0] != nil || len(grants[0].Leases) != 1 || !errors.Is(errs[1], errSlotDown) {
		t.Fatalf("again: %+v %v, %v; want the live one granted, the down one not sent", grants[0], errs[0], errs[1])
	}
	if err := l.Heartbeat(ctx); err != nil || !l.HostDegraded(down) {
		t.Fatalf("heartbeat %v, %s degraded %v: want it still down", err, down, l.HostDegraded(down))
	}

	c.Nodes[kill].Restart()
	waitFor(t, 60*time.Second, "the restarted master's slot to answer", func() bool {
		l.Heartbeat(ctx)
		return !l.HostDegraded(down)
	})
	if n, _ := l.SlotsDown(); n != 0 {
		t.Fatalf("%d slots still down", n)
	}
	g, err := l.Ask(ctx, Request{Host: down, Limits: lm, Want: 1})
	if err != nil || len(g.Leases) != 1 {
		t.Fatalf("after the restart: %+v, %v", g, err)
	}
	if g.InFlight != 2 {
		t.Fatalf("in flight %d after the restart; want the lost lease counted again (2)", g.InFlight)
	}
	if n, _ := l.Lost(); n != 1 {
		t.Fatalf("lost %d, want the down host's state found lost once", n)
	}
}

// TestClusterMasterDownGates runs the real dispatcher with the fleet's
// gates on a real Cluster, with a backlog for two hosts, and stops the
// master of one of them: that host's status says it paces on a local
// share while the other's still says shared, the fleet's status counts
// one host degraded, and every webhook of both arrives once.
func TestClusterMasterDownGates(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	quiet := slog.New(slog.DiscardHandler)
	lim, err := New(Options{Cluster: c.Addrs(), KeyPrefix: "t", Replica: "a", Timeout: time.Second,
		LeasePeriod: 3 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	kill, up, down := partialCluster(t, lim, c)
	sp, err := openJournaled(spool.Options{Dir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	p := &partner{}
	gs := NewGates(lim, quiet)
	d := deliver.New(deliver.Options{Reader: sp, Store: sp, Stats: sp, Journal: journalOf(sp), Policy: func(string) *deliver.Policy { p := policy(20, 5, 2); return &p },
		Client: &http.Client{Transport: p}, Logger: quiet, Gates: gs})
	lim.Start()
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()); lim.Close(); sp.Close() })
	r := &replica{d: d, sp: sp, gs: gs, lim: lim}

	c.Nodes[kill].Kill()
	r.add(t, up, 60)
	r.add(t, down, 60)
	var upState string
	waitFor(t, 30*time.Second, down+" on its local share while "+up+" has a backlog", func() bool {
		hd, okd := d.Host(down)
		hu, oku := d.Host(up)
		upState = hu.Fleet
		return okd && oku && hu.Queued > 0 && strings.HasPrefix(hd.Fleet, "degraded")
	})
	if upState != "shared" {
		t.Fatalf("%s: fleet %q while %s is degraded, want shared", up, upState, down)
	}
	if st := d.Fleet(); st.Degraded || st.State != "1 host degraded to a local share (1 Redis Cluster slot not answering): "+down+"; the others shared" {
		t.Fatalf("fleet status %+v, want shared with one host degraded", st)
	}
	waitFor(t, 60*time.Second, "every webhook delivered", func() bool { return r.left() == 0 })
	for _, h := range []string{up, down} {
		if n := len(p.arrivals(h)); n != 60 {
			t.Fatalf("%s: %d arrivals, want 60", h, n)
		}
	}
	if n := maxPerWindow(p.arrivals(up), time.Second); n > 5+20 {
		t.Fatalf("%s (shared): %d in a second, bound 25", up, n)
	}
}

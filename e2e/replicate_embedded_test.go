package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/natstest"
	"github.com/hookpace/hookpace/internal/redistest"
)

// startTogether starts one hookpace per config at once: with embedded
// NATS, none finishes starting before a majority of its peers is up.
func startTogether(t *testing.T, cfgs []string) []*Hookpace {
	t.Helper()
	hs := make([]*Hookpace, len(cfgs))
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		h := &Hookpace{t: t, Dir: t.TempDir()}
		h.Config = filepath.Join(h.Dir, "hookpace.yaml")
		writeConfig(t, h.Config, "127.0.0.1:0", "127.0.0.1:0", filepath.Join(h.Dir, "spool"), cfg)
		t.Cleanup(func() { h.Kill() })
		hs[i] = h
		wg.Add(1)
		go func() {
			defer wg.Done() // also when start fails the test (and ends this goroutine)
			h.start()
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return hs
}

// startEmbeddedTrio starts three replicas hp-0..2 on one Redis, each
// with an embedded NATS server, peers naming each other on loopback ports.
func startEmbeddedTrio(t *testing.T, redis, host string) []*Hookpace {
	t.Helper()
	client, route := make([]int, 3), make([]string, 3)
	for i := range 3 {
		client[i], route[i] = natstest.FreePort(t), fmt.Sprintf("127.0.0.1:%d", natstest.FreePort(t))
	}
	cfgs := make([]string, 3)
	for i := range 3 {
		cfgs[i] = fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
fleet: {redis: "%s", replica: hp-%d, lease_period: 3s, timeout: 900ms}
spool:
  replicate:
    nats:
      replicas: 3
      adopt_after: 6s
      timeout: 1900ms
      embedded:
        peers: ["%s"]
        listen: 127.0.0.1:%d
        cluster_listen: %s
hosts:
  "%s": {rate: 400/s, burst: 50, concurrency: 4}
`, redis, i, strings.Join(route, `", "`), client[i], route[i], host)
	}
	return startTogether(t, cfgs)
}

// Three hookpace replicas, each running its own nats-server in-process
// (spool.replicate.nats.embedded), clustered with the others on loopback
// ports and nothing else: no NATS to run beside them. Replica 0 takes
// webhooks for a paused partner; it is killed with SIGKILL and its spool
// deleted, its embedded server's store with it (the node is gone). The
// other two keep the stream's quorum; one of them adopts 0's queue and,
// after a resume there, the partner gets every webhook, each with the id
// 0 gave. A replica stopped with SIGTERM stops its server last, in lame
// duck.
func TestEmbeddedNATSReplicaLostIsAdopted(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rc := NewReceiver(t)
	hp := startEmbeddedTrio(t, srv.URL(), rc.Host())
	for _, h := range hp {
		if !strings.Contains(h.Log(), "embedded NATS server started") {
			t.Fatalf("no embedded NATS server started\n%s", h.Log())
		}
	}
	if out, err := hp[0].CLI("pause", rc.Host()); err != nil {
		t.Fatalf("hookpace pause at hp-0: %v\n%s", err, out)
	}

	const n = 1000
	ids := postIDs(t, hp[0], n, 16, func(i int) string { return fmt.Sprintf("%s/w/%d", rc.URL, i) })
	if r := replicationOf(t, hp[0]); !r.Reachable || r.Published < n {
		t.Fatalf("hp-0's replication after the posts: %+v", r)
	}
	store := filepath.Join(hp[0].Dir, "spool", "nats", "jetstream")
	if _, err := os.Stat(store); err != nil {
		t.Fatalf("hp-0's embedded JetStream store is not in its spool directory: %v", err)
	}
	if got := len(rc.Arrivals()); got != 0 {
		t.Fatalf("%d arrived at the paused partner", got)
	}

	hp[0].Kill()
	if err := os.RemoveAll(filepath.Join(hp[0].Dir, "spool")); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var adopter, other *Hookpace
	Poll(t, 60*time.Second, "hp-1 or hp-2 to adopt hp-0's queue", func() bool {
		for i, h := range hp[1:] {
			if replicationOf(t, h).Adoptions == 1 {
				adopter, other = h, hp[2-i]
				return true
			}
		}
		return false
	})
	t.Logf("hp-0's queue adopted %v after the kill", time.Since(killed).Round(100*time.Millisecond))
	if r := replicationOf(t, adopter); r.Adopted != n {
		t.Fatalf("the adopter took %d webhooks, want %d", r.Adopted, n)
	}
	if r := replicationOf(t, other); r.Adoptions != 0 {
		t.Fatalf("both replicas adopted hp-0's queue: %+v", r)
	}
	if out, err := adopter.CLI("resume", rc.Host()); err != nil {
		t.Fatalf("hookpace resume at the adopter: %v\n%s", err, out)
	}
	adoptedArrive(t, rc, ids, n, "hp-0")
	// Ingest goes on at the two left (two of three servers: a quorum).
	postIDs(t, other, 20, 4, func(i int) string { return fmt.Sprintf("%s/after/%d", rc.URL, i) })

	other.Signal(syscall.SIGTERM)
	if code := other.Wait(60 * time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit %d\n%s", code, other.Log())
	}
	log := other.Log()
	if i, j := strings.Index(log, "hookpace stopped"), strings.Index(log, "embedded NATS server stopped"); i < 0 || j < i {
		t.Fatalf("the embedded server must stop after the spool\n%s", log)
	}
}

// A rolling restart of the three replicas, one at a time with SIGTERM,
// while webhooks keep coming through a replica that is not restarting:
// each stopping server hands its leaderships over before it goes, the
// stream keeps a majority, and every webhook acknowledged arrives. The
// refusals (503 while a leadership moves) are counted and bounded.
func TestEmbeddedNATSRollingRestart(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rc := NewReceiver(t)
	hp := startEmbeddedTrio(t, srv.URL(), rc.Host())

	var mu sync.Mutex
	acked := map[string]bool{}
	var sent, refused, other int
	send := func(through *Hookpace, stop <-chan struct{}) {
		c := through.Client()
		defer c.CloseIdleConnections()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := c.Post(fmt.Sprintf("%s/roll/%d", rc.URL, i), "application/json", strings.NewReader(string(WebhookBody(i))))
			mu.Lock()
			sent++
			switch {
			case err != nil:
				other++
			case resp.StatusCode == 202:
				acked[resp.Header.Get("X-Hookpace-Id")] = true
			case resp.StatusCode == 503 && resp.Header.Get("Retry-After") != "":
				refused++
			default:
				other++
			}
			mu.Unlock()
			if err == nil {
				resp.Body.Close()
			}
		}
	}
	// Restart each of roll while webhooks come through via.
	roll := func(via *Hookpace, roll ...*Hookpace) {
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { defer close(done); send(via, stop) }()
		for _, h := range roll {
			began := time.Now()
			h.Signal(syscall.SIGTERM)
			if code := h.Wait(60 * time.Second); code != 0 {
				t.Errorf("SIGTERM: exit %d\n%s", code, h.Log())
			}
			stopped := time.Since(began)
			h.Restart()
			t.Logf("restarted a replica: stopped in %v, back %v after the SIGTERM", stopped.Round(10*time.Millisecond),
				time.Since(began).Round(10*time.Millisecond))
		}
		close(stop)
		<-done
	}
	roll(hp[0], hp[2], hp[1])
	roll(hp[1], hp[0])
	mu.Lock()
	t.Logf("during the roll: %d sent, %d acknowledged, %d refused with 503, %d other", sent, len(acked), refused, other)
	if other > 0 || len(acked) < 50 || refused > sent/10 {
		t.Fatalf("rolling restart: %d sent, %d acknowledged, %d refused, %d other answers or errors", sent, len(acked), refused, other)
	}
	mu.Unlock()
	rc.WaitFor(t, 90*time.Second, "every acknowledged webhook delivered", func(as []Arrival) bool {
		seen := map[string]bool{}
		for _, x := range as {
			seen[x.Header.Get("X-Hookpace-Id")] = true
		}
		mu.Lock()
		defer mu.Unlock()
		for id := range acked {
			if !seen[id] {
				return false
			}
		}
		return true
	})
}

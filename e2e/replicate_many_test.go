package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/natstest"
	"github.com/hookpace/hookpace/internal/redistest"
)

// Three replicas; a takes 5,000 webhooks across 20 paused partners, each
// partner's in one ordering key; a is lost. One of b and c adopts a's
// queue; after a resume of each partner every webhook arrives, each
// partner's ordering key in order, duplicates per partner at most twice
// its concurrency.
func TestReplicatedManyHostsAdoptedInOrder(t *testing.T) {
	t.Parallel()
	nats := natstest.Start(t, 3)
	srv := redistest.Start(t)
	const hosts, per, concurrency = 20, 250, 4
	rcs := make([]*Receiver, hosts)
	var hostCfg string
	for i := range rcs {
		rcs[i] = NewReceiver(t)
		hostCfg += fmt.Sprintf("\n  \"%s\": {rate: 500/s, burst: 50, concurrency: %d}", rcs[i].Host(), concurrency)
	}
	fleet := func(name string) string {
		return fmt.Sprintf(`fleet: {redis: "%s", replica: %s, lease_period: 3s, timeout: 900ms}`, srv.URL(), name)
	}
	var hps []*Hookpace
	for _, name := range []string{"a", "b", "c"} {
		hps = append(hps, Start(t, replicatedConfig(nats.URLs(), fleet(name), hostCfg)))
	}
	a := hps[0]
	for _, rc := range rcs {
		if out, err := a.CLI("pause", rc.Host()); err != nil {
			t.Fatalf("hookpace pause at a: %v\n%s", err, out)
		}
	}
	ids := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for h, rc := range rcs {
		wg.Add(1)
		go func() { // a host's webhooks one after another: their order is defined
			defer wg.Done()
			c := a.Client()
			defer c.CloseIdleConnections()
			for seq := 1; seq <= per; seq++ {
				status, hdr, body := PostRaw(t, c, fmt.Sprintf("%s/h%d/%d", rc.URL, h, seq), WebhookBody(seq), orderHeader("k", seq))
				if status != http.StatusAccepted {
					t.Errorf("host %d webhook %d: %d %s", h, seq, status, body)
					return
				}
				mu.Lock()
				ids[hdr.Get("X-Hookpace-Id")] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() || len(ids) != hosts*per {
		t.Fatalf("%d distinct ids acknowledged, want %d", len(ids), hosts*per)
	}

	a.Kill()
	if err := os.RemoveAll(filepath.Join(a.Dir, "spool")); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var adopter *Hookpace
	Poll(t, 40*time.Second, "b or c to adopt a's queue", func() bool {
		for _, hp := range hps[1:] {
			if replicationOf(t, hp).Adoptions == 1 {
				adopter = hp
				return true
			}
		}
		return false
	})
	t.Logf("a's queue adopted %v after the kill", time.Since(killed).Round(100*time.Millisecond))
	for _, hp := range hps[1:] {
		if r := replicationOf(t, hp); hp != adopter && r.Adoptions != 0 {
			t.Fatalf("both b and c adopted a's queue")
		}
	}
	for _, rc := range rcs {
		if out, err := adopter.CLI("resume", rc.Host()); err != nil {
			t.Fatalf("hookpace resume: %v\n%s", err, out)
		}
	}
	resumed := time.Now()
	for h, rc := range rcs {
		rc.WaitFor(t, 90*time.Second, fmt.Sprintf("host %d's %d webhooks", h, per), func(as []Arrival) bool {
			seen := map[string]bool{}
			for _, x := range as {
				seen[x.Header.Get("X-Hookpace-Id")] = true
			}
			return len(seen) >= per
		})
		times := map[string]int{}
		last, dups := 0, 0
		for _, x := range rc.Arrivals() {
			id := x.Header.Get("X-Hookpace-Id")
			if !ids[id] {
				t.Fatalf("host %d: a delivery with an id a never gave: %q", h, id)
			}
			if times[id]++; times[id] > 1 {
				dups++
				continue
			}
			seq, _ := strconv.Atoi(x.Header.Get("X-Seq"))
			if seq != last+1 {
				t.Fatalf("host %d: webhook %d arrived first after %d: the ordering key's order is lost", h, seq, last)
			}
			last = seq
		}
		if dups > 2*concurrency {
			t.Fatalf("host %d: %d duplicates, want at most %d", h, dups, 2*concurrency)
		}
	}
	t.Logf("all %d arrived %v after the resume", hosts*per, time.Since(resumed).Round(100*time.Millisecond))
}

package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/natstest"
	"github.com/hookpace/hookpace/internal/redistest"
)

// replicationView is /v1/spool's replication.
type replicationView struct {
	Reachable bool     `json:"reachable"`
	Epoch     uint64   `json:"epoch"`
	Leases    []string `json:"leases"`
	Adoptions int64    `json:"adoptions"`
	Adopted   int64    `json:"adopted"`
	Published int64    `json:"published"`
}

func replicationOf(t *testing.T, hp *Hookpace) replicationView {
	t.Helper()
	var out struct {
		Messages    int64            `json:"messages"`
		Replication *replicationView `json:"replication"`
	}
	hp.AdminJSON("/v1/spool", &out)
	if out.Replication == nil {
		t.Fatal("/v1/spool has no replication")
	}
	return *out.Replication
}

// replicatedPair starts three clustered nats-servers, one Redis, a
// partner, and replicas a and b of one fleet replicating to the servers.
func replicatedPair(t *testing.T) (a, b *Hookpace, rc *Receiver) {
	t.Helper()
	nats := natstest.Start(t, 3)
	srv := redistest.Start(t)
	rc = NewReceiver(t)
	hostCfg := fmt.Sprintf(`"%s": {rate: 400/s, burst: 50, concurrency: 4}`, rc.Host())
	fleet := func(name string) string {
		return fmt.Sprintf(`fleet: {redis: "%s", replica: %s, lease_period: 3s, timeout: 900ms}`, srv.URL(), name)
	}
	a = Start(t, replicatedConfig(nats.URLs(), fleet("a"), hostCfg))
	b = Start(t, replicatedConfig(nats.URLs(), fleet("b"), hostCfg))
	return a, b, rc
}

func replicatedConfig(urls []string, fleet, hostCfg string) string {
	return fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
%s
spool:
  replicate:
    nats: {urls: ["%s"], replicas: 3, adopt_after: 6s, timeout: 1900ms}
hosts:
  %s
`, fleet, strings.Join(urls, `", "`), hostCfg)
}

// postIDs posts n webhooks through hp, parallel at a time, and returns
// the X-Hookpace-Id of each 202; it fails the test on any other answer.
func postIDs(t *testing.T, hp *Hookpace, n, parallel int, target func(i int) string) map[string]bool {
	t.Helper()
	c := hp.Client()
	defer c.CloseIdleConnections()
	var mu sync.Mutex
	ids := map[string]bool{}
	var fails []string
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			resp, err := c.Post(target(i), "application/json", bytes.NewReader(WebhookBody(i)))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fails = append(fails, err.Error())
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			id := resp.Header.Get("X-Hookpace-Id")
			if resp.StatusCode != http.StatusAccepted || id == "" {
				fails = append(fails, fmt.Sprintf("webhook %d: %d, id %q", i, resp.StatusCode, id))
				return
			}
			ids[id] = true
		}()
	}
	wg.Wait()
	if len(fails) > 0 {
		t.Fatalf("%d of %d webhooks not acknowledged, first: %s", len(fails), n, fails[0])
	}
	return ids
}

// Losing a node loses none of its acknowledged webhooks: replica a takes
// 2,000 webhooks for a paused partner, its process is killed and its spool
// directory deleted (the node is gone); b adopts a's queue from the
// stream (three nats-servers, R3) once a has been silent for adopt_after,
// and after a resume on b the partner gets all 2,000, each with the
// X-Hookpace-Id a gave, at most 8 twice.
func TestReplicatedQueueSurvivesLosingItsNode(t *testing.T) {
	t.Parallel()
	a, b, rc := replicatedPair(t)
	for _, hp := range []*Hookpace{a, b} {
		Poll(t, 10*time.Second, "2 live replicas", func() bool { return fleetOf(t, hp).Live == 2 })
	}
	if out, err := a.CLI("pause", rc.Host()); err != nil {
		t.Fatalf("hookpace pause at a: %v\n%s", err, out)
	}

	const n = 2000
	ids := postIDs(t, a, n, 32, func(i int) string { return fmt.Sprintf("%s/w/%d", rc.URL, i) })
	if len(ids) != n {
		t.Fatalf("%d distinct ids for %d webhooks", len(ids), n)
	}
	if r := replicationOf(t, a); !r.Reachable || r.Published < n {
		t.Fatalf("a's replication after the posts: %+v", r)
	}
	if got := len(rc.Arrivals()); got != 0 {
		t.Fatalf("%d arrived at the paused partner", got)
	}

	a.Kill()
	if err := os.RemoveAll(filepath.Join(a.Dir, "spool")); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	Poll(t, 30*time.Second, "b to adopt a's queue", func() bool { return replicationOf(t, b).Adoptions == 1 })
	t.Logf("b adopted a's queue %v after the kill", time.Since(killed).Round(100*time.Millisecond))
	if r := replicationOf(t, b); r.Adopted != n {
		t.Fatalf("b adopted %d webhooks, want %d", r.Adopted, n)
	}
	out, err := b.CLI("status")
	if err != nil || !strings.Contains(out, "replication: stream hookpace (R3), replica b") || !strings.Contains(out, "1 adoptions, 2000 webhooks adopted") {
		t.Fatalf("hookpace status at b: %v\n%s", err, out)
	}
	if out, err := b.CLI("resume", rc.Host()); err != nil {
		t.Fatalf("hookpace resume at b: %v\n%s", err, out)
	}
	resumed := time.Now()
	adoptedArrive(t, rc, ids, n, "a")
	t.Logf("all %d arrived %v after the resume", n, time.Since(resumed).Round(100*time.Millisecond))
}

// adoptedArrive waits for n webhooks with distinct X-Hookpace-Ids at rc,
// each an id the lost replica (who) gave, at most 8 of them twice.
func adoptedArrive(t *testing.T, rc *Receiver, ids map[string]bool, n int, who string) {
	t.Helper()
	rc.WaitFor(t, 90*time.Second, fmt.Sprintf("all %d at the partner", n), func(as []Arrival) bool {
		seen := map[string]bool{}
		for _, x := range as {
			seen[x.Header.Get("X-Hookpace-Id")] = true
		}
		return len(seen) >= n
	})
	times := map[string]int{}
	for _, x := range rc.Arrivals() {
		id := x.Header.Get("X-Hookpace-Id")
		if !ids[id] {
			t.Fatalf("a delivery with X-Hookpace-Id %q, which %s never gave (path %s)", id, who, x.Path)
		}
		times[id]++
	}
	twice := 0
	for _, c := range times {
		if c > 1 {
			twice++
		}
	}
	if len(times) != n || twice > 8 {
		t.Fatalf("%d of %d delivered, %d more than once (at most 8)", len(times), n, twice)
	}
}

// With one of three nats-servers gone ingest goes on (after an election
// if it led the stream). With two gone the stream has no quorum: with
// on_unavailable: refuse the door answers 503 with Retry-After, never
// 202; once they are back, ingest resumes, and every webhook acknowledged
// before, during and after is delivered.
func TestReplicationWithoutQuorumRefuses(t *testing.T) {
	t.Parallel()
	nats := natstest.Start(t, 3)
	srv := redistest.Start(t)
	rc := NewReceiver(t)
	hp := Start(t, replicatedConfig(nats.URLs(),
		fmt.Sprintf(`fleet: {redis: "%s", replica: solo, lease_period: 3s, timeout: 900ms}`, srv.URL()),
		fmt.Sprintf(`"%s": {rate: 200/s, burst: 20}`, rc.Host())))
	acked := postIDs(t, hp, 50, 8, func(i int) string { return fmt.Sprintf("%s/before/%d", rc.URL, i) })

	nats.Servers[1].Kill()
	// If it led the stream, the others elect a new leader (NATS's Raft
	// waits 4 to 9 s): webhooks meanwhile get 503, then ingest goes on.
	c := hp.Client()
	Poll(t, 30*time.Second, "ingest with one server down", func() bool {
		status, hdr, _ := PostRaw(t, c, rc.URL+"/one-down/probe", WebhookBody(0), nil)
		if status == http.StatusAccepted {
			acked[hdr.Get("X-Hookpace-Id")] = true
		}
		return status == http.StatusAccepted
	})
	more := postIDs(t, hp, 20, 4, func(i int) string { return fmt.Sprintf("%s/one-down/%d", rc.URL, i) })
	for id := range more {
		acked[id] = true
	}
	nats.Servers[2].Kill()
	for i := range 6 {
		status, hdr, body := PostRaw(t, c, fmt.Sprintf("%s/no-quorum/%d", rc.URL, i), WebhookBody(i), nil)
		if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
			t.Fatalf("webhook %d without quorum: %d (Retry-After %q) %s, want 503 with Retry-After", i, status, hdr.Get("Retry-After"), body)
		}
	}
	if r := replicationOf(t, hp); r.Reachable {
		t.Fatalf("replication without quorum: %+v", r)
	}
	nats.Servers[1].Restart()
	nats.Servers[2].Restart()
	Poll(t, 60*time.Second, "ingest to resume", func() bool {
		status, hdr, _ := PostRaw(t, c, rc.URL+"/after/probe", WebhookBody(0), nil)
		if status == http.StatusAccepted {
			acked[hdr.Get("X-Hookpace-Id")] = true
		}
		return status == http.StatusAccepted
	})
	after := postIDs(t, hp, 50, 8, func(i int) string { return fmt.Sprintf("%s/after/%d", rc.URL, i) })
	for id := range after {
		acked[id] = true
	}
	rc.WaitFor(t, 60*time.Second, "every acknowledged webhook delivered", func(as []Arrival) bool {
		seen := map[string]bool{}
		for _, x := range as {
			seen[x.Header.Get("X-Hookpace-Id")] = true
		}
		for id := range acked {
			if !seen[id] {
				return false
			}
		}
		return true
	})
	for _, x := range rc.Arrivals() {
		if strings.Contains(x.Path, "/no-quorum/") {
			t.Fatalf("a webhook refused with 503 was delivered: %s", x.Path)
		}
	}
}

// A replica whose queue was adopted comes back on its old spool (restored
// from a copy taken at the kill) under the same name: the stream no longer
// holds what the adopter took, so it starts with an empty queue and
// delivers none of it.
func TestReplicaBackOnItsOldSpoolDeliversNothingAdopted(t *testing.T) {
	t.Parallel()
	a, b, rc := replicatedPair(t)
	if out, err := a.CLI("pause", rc.Host()); err != nil {
		t.Fatalf("hookpace pause at a: %v\n%s", err, out)
	}
	const n = 300
	ids := postIDs(t, a, n, 16, func(i int) string { return fmt.Sprintf("%s/w/%d", rc.URL, i) })

	a.Kill()
	spoolDir := filepath.Join(a.Dir, "spool")
	kept := filepath.Join(t.TempDir(), "spool-copy")
	if out, err := exec.Command("cp", "-a", spoolDir, kept).CombinedOutput(); err != nil {
		t.Fatalf("copy a's spool: %v\n%s", err, out)
	}
	if err := os.RemoveAll(spoolDir); err != nil {
		t.Fatal(err)
	}
	Poll(t, 30*time.Second, "b to adopt a's queue", func() bool { return replicationOf(t, b).Adoptions == 1 })
	if out, err := b.CLI("resume", rc.Host()); err != nil {
		t.Fatalf("hookpace resume at b: %v\n%s", err, out)
	}
	rc.WaitFor(t, 60*time.Second, "all 300 at the partner", func(as []Arrival) bool {
		seen := map[string]bool{}
		for _, x := range as {
			seen[x.Header.Get("X-Hookpace-Id")] = true
		}
		return len(seen) >= n
	})

	if err := os.Rename(kept, spoolDir); err != nil {
		t.Fatal(err)
	}
	a.Restart()
	var back struct {
		Messages    int64 `json:"messages"`
		Replication struct {
			Epoch   uint64 `json:"epoch"`
			Dropped int64  `json:"dropped_at_start"`
		} `json:"replication"`
	}
	a.AdminJSON("/v1/spool", &back)
	if back.Messages != 0 || back.Replication.Dropped != n || back.Replication.Epoch < 3 {
		t.Fatalf("a back on its old spool: %+v, want an empty queue, %d dropped, epoch 3 or more\n%s", back, n, a.Log())
	}
	for _, x := range rc.Arrivals() {
		if !ids[x.Header.Get("X-Hookpace-Id")] {
			t.Fatalf("a delivery with an id a never gave: %q", x.Header.Get("X-Hookpace-Id"))
		}
	}
}

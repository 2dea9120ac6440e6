package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// More of the lanes' ordering from outside (lanes_test.go has the main
// cases): a key's first webhook retrying across a kill -9, a delayed
// first webhook, a dead letter in a key, and the acceptance's 20 keys.

// postOrdered posts key's webhooks from..to (inclusive) through hp, each
// with extra headers if extra is given, and fails unless each gets 202.
func postOrdered(t *testing.T, hp *Hookpace, rc *Receiver, key string, from, to int, extra http.Header) {
	t.Helper()
	c := hp.Client()
	defer c.CloseIdleConnections()
	for seq := from; seq <= to; seq++ {
		h := orderHeader(key, seq)
		for k, v := range extra {
			h[k] = v
		}
		if status, _, body := PostRaw(t, c, rc.URL+"/"+key, WebhookBody(seq), h); status != http.StatusAccepted {
			t.Fatalf("%s/%d: %d %s", key, seq, status, body)
		}
	}
}

// A key's first webhook waits for its retry (a 503 with a long
// Retry-After) when hookpace is killed: after the restart it goes first,
// then the rest in order.
func TestOrderingRetryAcrossKillE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	p := newOrderPartner("k/1")
	rc.Handle = p.handle
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 100/s, burst: 5, concurrency: 4}
`, rc.Host()))
	postOrdered(t, hp, rc, "k", 1, 1, nil)
	rc.WaitFor(t, 10*time.Second, "k/1's first attempt", func(as []Arrival) bool { return len(as) == 1 && as[0].Status != 0 })
	postOrdered(t, hp, rc, "k", 2, 5, nil)
	hp.Kill()
	hp.Restart()
	rc.WaitFor(t, 30*time.Second, "k's five delivered", func(as []Arrival) bool { return Delivered2xx(as) == 5 })
	if arrived, ok := p.seqs("k"); fmt.Sprint(ok) != "[1 2 3 4 5]" {
		t.Errorf("k's 2xx %v (arrived %v), want [1 2 3 4 5]", ok, arrived)
	}
	for _, e := range p.earlyOnes() {
		t.Error(e)
	}
}

// A key's first webhook is delayed: the key's next ones wait for it,
// while another key goes on.
func TestOrderingDelayedFirstE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	p := newOrderPartner()
	rc.Handle = p.handle
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 100/s, burst: 5, concurrency: 4}
`, rc.Host()))
	postOrdered(t, hp, rc, "k", 1, 1, http.Header{"Hookpace-Delay": {"2s"}})
	postOrdered(t, hp, rc, "k", 2, 3, nil)
	postOrdered(t, hp, rc, "other", 1, 3, nil)
	rc.WaitFor(t, 30*time.Second, "all six delivered", func(as []Arrival) bool { return Delivered2xx(as) == 6 })
	if _, ok := p.seqs("k"); fmt.Sprint(ok) != "[1 2 3]" {
		t.Errorf("k's 2xx %v, want [1 2 3]", ok)
	}
	if as := rc.Arrivals(); as[0].Path != "/other" {
		t.Errorf("arrivals %v: the other key waited for k's delayed webhook", paths(as))
	}
	for _, e := range p.earlyOnes() {
		t.Error(e)
	}
}

// A dead letter in an ordered key moves the key on, and says so: in
// /v1/hosts/{host} and in the log.
func TestOrderingDeadLetterE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	p := newOrderPartner()
	rc.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		if r.Header.Get("X-Seq") == "2" {
			w.WriteHeader(http.StatusGone)
			return
		}
		p.handle(w, r, n)
	}
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 100/s, burst: 5, concurrency: 4}
`, rc.Host()))
	postOrdered(t, hp, rc, "k", 1, 4, nil)
	rc.WaitFor(t, 30*time.Second, "k/1, k/3 and k/4 delivered", func(as []Arrival) bool { return Delivered2xx(as) == 3 })
	if _, ok := p.seqs("k"); fmt.Sprint(ok) != "[1 3 4]" {
		t.Errorf("k's 2xx %v, want [1 3 4]", ok)
	}
	var hv struct {
		Lanes *struct {
			OrderedDead int64  `json:"ordered_dead"`
			LastDeadKey string `json:"last_ordered_dead_key"`
		} `json:"lanes"`
	}
	hp.AdminJSON("/v1/hosts/"+rc.Host(), &hv)
	if hv.Lanes == nil || hv.Lanes.OrderedDead != 1 || !strings.Contains(hv.Lanes.LastDeadKey, "k") {
		t.Errorf("/v1/hosts lanes: %+v, want 1 dead letter in ordered key k", hv.Lanes)
	}
	// The log is written in batches: wait for the line.
	Poll(t, 10*time.Second, "the log's warning of a dead letter in an ordered key", func() bool {
		return strings.Contains(hp.Log(), "dead letter in an ordered key")
	})
}

// The acceptance: 20 ordering keys × 30 webhooks, to a partner
// that answers 503 to every 7th request: every webhook arrives, and each
// key's 2xx are in sequence order.
func TestOrderingAcceptanceE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	p := newOrderPartner()
	p.failEvery = 7
	rc.Handle = p.handle
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 500/s, burst: 20, concurrency: 8, backoff_initial: 100ms, backoff_max: 400ms, max_attempts: 50}
`, rc.Host()))
	const keys, per = 20, 30
	for seq := range per { // each key's webhook seq+1 after its seq's 202
		postKeyed(t, hp, rc, seq*keys, (seq+1)*keys, 8, func(i int) http.Header {
			return orderHeader(fmt.Sprint("k", i%keys), i/keys+1)
		})
	}
	rc.WaitFor(t, 120*time.Second, "every webhook delivered", func(as []Arrival) bool { return Delivered2xx(as) == keys*per })
	want := make([]int, per)
	for i := range want {
		want[i] = i + 1
	}
	for k := range keys {
		if _, ok := p.seqs(fmt.Sprint("k", k)); fmt.Sprint(ok) != fmt.Sprint(want) {
			t.Errorf("k%d's 2xx %v, want 1..%d in order", k, ok, per)
		}
	}
	for _, e := range p.earlyOnes() {
		t.Error(e)
	}
}

// A hand-off sends an ordered key's webhooks one at a time, in order:
// hookpace B, which takes them, delivers each key in sequence.
func TestOrderingAcrossHandoffE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	p := newOrderPartner()
	p.failEvery = 7
	rc.Handle = p.handle
	b := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 1000/s, burst: 100, concurrency: 8, backoff_initial: 100ms, backoff_max: 200ms, max_attempts: 50}
`, rc.Host()))
	a := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 1000/s, burst: 100, concurrency: 8}
shutdown: {timeout: 30s, handoff: "http://%s"}
`, rc.Host(), b.Proxy))
	pauseHost(t, a, rc.Host())
	const keys, per = 8, 15
	for seq := range per {
		postKeyed(t, a, rc, seq*keys, (seq+1)*keys, 8, func(i int) http.Header {
			return orderHeader(fmt.Sprint("k", i%keys), i/keys+1)
		})
	}
	a.Signal(syscall.SIGTERM)
	if code := a.Wait(60 * time.Second); code != 0 {
		t.Fatalf("A exited %d\n%s", code, a.Log())
	}
	rc.WaitFor(t, 60*time.Second, "every webhook delivered by B", func(as []Arrival) bool { return Delivered2xx(as) == keys*per })
	want := make([]int, per)
	for i := range want {
		want[i] = i + 1
	}
	for k := range keys {
		if arrived, ok := p.seqs(fmt.Sprint("k", k)); fmt.Sprint(ok) != fmt.Sprint(want) {
			t.Errorf("k%d's 2xx %v (arrived %v), want 1..%d in order", k, ok, arrived, per)
		}
	}
	for _, e := range p.earlyOnes() {
		t.Error(e)
	}
}

// A hand-off carries a delay that is still ahead: hookpace B, which takes
// the webhook, holds it until its not-before too.
func TestDelayAcrossHandoffE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	b := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 100/s}
`, rc.Host()))
	a := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 100/s}
shutdown: {timeout: 30s, handoff: "http://%s"}
`, rc.Host(), b.Proxy))
	sent := time.Now()
	if status, _, body := PostRaw(t, a.Client(), rc.URL+"/delayed", WebhookBody(0), http.Header{"Hookpace-Delay": {"4s"}}); status != http.StatusAccepted {
		t.Fatalf("delayed: %d %s", status, body)
	}
	a.Signal(syscall.SIGTERM)
	if code := a.Wait(60 * time.Second); code != 0 {
		t.Fatalf("A exited %d\n%s", code, a.Log())
	}
	if status, _, body := PostRaw(t, b.Client(), rc.URL+"/plain", WebhookBody(1), nil); status != http.StatusAccepted {
		t.Fatalf("plain: %d %s", status, body)
	}
	rc.WaitFor(t, 30*time.Second, "both delivered", func(as []Arrival) bool { return Delivered2xx(as) == 2 })
	as := rc.Arrivals()
	if as[0].Path != "/plain" || as[1].At.Before(sent.Add(4*time.Second)) {
		t.Errorf("arrivals %v, the delayed one %v after it was sent to A; want it last, no sooner than 4s", paths(as), as[1].At.Sub(sent))
	}
}

// A delay with a coalesce key debounces: the first update sets when the
// webhook goes, later ones (with a delay of their own, or none) replace
// its content and keep that time; one webhook arrives, the last content.
func TestDelayDebounceE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 50/s}
`, rc.Host()))
	c := hp.Client()
	sent := time.Now()
	for i, delay := range []string{"3s", "10s", ""} {
		h := http.Header{"Hookpace-Coalesce-Key": {"state-1"}}
		if delay != "" {
			h.Set("Hookpace-Delay", delay)
		}
		if status, _, body := PostRaw(t, c, rc.URL+"/state", []byte(fmt.Sprint("v", i)), h); status != http.StatusAccepted {
			t.Fatalf("update %d: %d %s", i, status, body)
		}
	}
	if status, _, body := PostRaw(t, c, rc.URL+"/after", WebhookBody(1), nil); status != http.StatusAccepted {
		t.Fatalf("after: %d %s", status, body)
	}
	rc.WaitFor(t, 30*time.Second, "the debounced webhook", func(as []Arrival) bool { return Delivered2xx(as) == 2 })
	as := rc.Arrivals()
	if as[0].Path != "/after" || string(as[1].Body) != "v2" || as[1].At.Before(sent.Add(3*time.Second)) {
		t.Errorf("arrivals %v, the debounced one with %q %v after the first update; want it last, v2, no sooner than 3s",
			paths(as), as[1].Body, as[1].At.Sub(sent))
	}
	if len(as) != 2 {
		t.Errorf("%d arrivals, want 2", len(as))
	}
}

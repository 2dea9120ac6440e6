package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestBatchedBacklog: 200 webhooks queued for a
// paused host with batch {max_events: 50, max_wait: 1s, format:
// json-array}, then resumed, reach the receiver in at most 5 requests,
// each a JSON array, which together hold each of the 200 bodies exactly
// once, byte for byte. /v1/hosts, the metrics and the delivery log line
// count both requests and webhooks.
func TestBatchedBacklog(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  %q:
    batch: {max_events: 50, max_wait: 1s, format: json-array}
`, rc.Host()))
	if out, err := hp.CLI("pause", rc.Host()); err != nil {
		t.Fatalf("pause: %v\n%s", err, out)
	}
	PostAll(t, hp, 200, 16, func(i int) string { return fmt.Sprintf("%s/orders", rc.URL) })
	if out, err := hp.CLI("resume", rc.Host()); err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	members := func(as []Arrival) int {
		n := 0
		for _, a := range as {
			var els []json.RawMessage
			if json.Unmarshal(a.Body, &els) == nil {
				n += len(els)
			}
		}
		return n
	}
	rc.WaitFor(t, 30*time.Second, "200 webhooks in batches", func(as []Arrival) bool { return members(as) >= 200 })
	got := rc.Arrivals()
	if len(got) > 5 {
		t.Errorf("%d requests for 200 webhooks with max_events 50, want at most 5", len(got))
	}
	seen := map[string]int{}
	for _, a := range got {
		var els []json.RawMessage
		if err := json.Unmarshal(a.Body, &els); err != nil {
			t.Fatalf("a request that is not a JSON array: %v: %.100q", err, a.Body)
		}
		if ct := a.Header.Get("Content-Type"); ct != "application/json" || a.Path != "/orders" {
			t.Errorf("batch to %s with Content-Type %q", a.Path, ct)
		}
		for _, e := range els {
			seen[string(e)]++
		}
	}
	for i := range 200 {
		if n := seen[string(WebhookBody(i))]; n != 1 {
			t.Errorf("body %d arrived %d times, want exactly once", i, n)
		}
	}
	if len(seen) != 200 {
		t.Errorf("%d distinct bodies arrived, want the 200 sent", len(seen))
	}

	var st struct {
		Hosts []struct {
			Host  string `json:"host"`
			Batch *struct {
				Format    string `json:"format"`
				MaxEvents int    `json:"max_events"`
				Requests  int    `json:"requests"`
				Webhooks  int    `json:"webhooks"`
			} `json:"batch"`
		} `json:"hosts"`
	}
	Poll(t, 10*time.Second, "/v1/hosts counts the batches", func() bool {
		hp.AdminJSON("/v1/hosts", &st)
		return len(st.Hosts) == 1 && st.Hosts[0].Batch != nil && st.Hosts[0].Batch.Webhooks == 200
	})
	if b := st.Hosts[0].Batch; b.Requests != len(got) || b.Format != "json-array" || b.MaxEvents != 50 {
		t.Errorf("/v1/hosts batch %+v, want %d requests of json-array, max_events 50", *b, len(got))
	}
	if out, err := hp.CLI("status"); err != nil || !strings.Contains(out, fmt.Sprintf("batches of up to 50 (json-array): 200 webhooks in %d requests", len(got))) {
		t.Errorf("hookpace status: %v\n%s", err, out)
	}
	// The batch's webhooks are counted for /v1/hosts a moment before the
	// metric counts them.
	want := fmt.Sprintf(`hookpace_batch_webhooks_total{host=%q,outcome="delivered"} 200`, rc.Host())
	Poll(t, 10*time.Second, want, func() bool { return strings.Contains(hp.Metrics(), want) })
	// The log is flushed every moment (telemetry.BufferedWriter).
	Poll(t, 10*time.Second, "a delivery log line per request", func() bool {
		return strings.Count(hp.Log(), "msg=delivery ") == len(got)
	})
	if !strings.Contains(hp.Log(), "webhooks=50") {
		t.Errorf("no delivery line counts its webhooks:\n%s", hp.Log())
	}
}

// TestSignedBatchVerifies: a batch is signed as one body. The receiver
// that verifies with the standardwebhooks npm package accepts it; its
// webhook-id names the first and last members; a 422 buries every member
// as its own dead letter, and one replayed alone is delivered.
func TestSignedBatchVerifies(t *testing.T) {
	t.Parallel()
	node, verdicts := startNodeReceiver(t, e2eWhsec)
	var fail atomic.Bool
	fail.Store(true)
	mid := NewReceiver(t)
	mid.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		if fail.Load() && n == 1 {
			w.WriteHeader(http.StatusUnprocessableEntity)
			return
		}
		body := mid.Arrivals()[n-1].Body
		req, _ := http.NewRequest(r.Method, node+r.URL.Path, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	}
	secret := filepath.Join(t.TempDir(), "whsec")
	if err := os.WriteFile(secret, []byte(e2eWhsec+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  %q:
    batch: {max_events: 10, max_wait: 5s, format: envelope, headers: [X-Event-Type]}
    sign: {scheme: standard-webhooks, secret_file: %s}
`, mid.Host(), secret))
	c := hp.Client()
	var ids []string
	post := func(n int) {
		for i := range n {
			status, id := hp.Post(c, mid.URL+"/hooks", []byte(fmt.Sprintf(`{"n": %d}`, i)),
				http.Header{"Content-Type": {"application/json"}, "X-Event-Type": {"order.updated"}})
			if status != http.StatusAccepted {
				t.Fatalf("POST %d: %d", i, status)
			}
			ids = append(ids, id)
		}
	}
	post(10) // a full batch, answered 422
	mid.WaitFor(t, 20*time.Second, "the first batch", func(as []Arrival) bool { return len(as) == 1 })
	var dead struct {
		Dead []struct {
			ID     string `json:"id"`
			Reason string `json:"reason"`
		} `json:"dead"`
	}
	Poll(t, 10*time.Second, "ten dead letters", func() bool {
		hp.AdminJSON("/v1/dead", &dead)
		return len(dead.Dead) == 10
	})
	for _, d := range dead.Dead {
		if !strings.Contains(d.Reason, "422") {
			t.Errorf("dead letter %s: reason %q", d.ID, d.Reason)
		}
	}
	fail.Store(false)
	if out, err := hp.CLI("dead", "replay", ids[3]); err != nil || !strings.Contains(out, "replayed 1") {
		t.Fatalf("dead replay %s: %v\n%s", ids[3], err, out)
	}
	mid.WaitFor(t, 20*time.Second, "the replayed one, alone after max_wait", func(as []Arrival) bool { return len(as) == 2 })
	post(10)
	mid.WaitFor(t, 20*time.Second, "the second batch", func(as []Arrival) bool { return len(as) == 3 })
	Poll(t, 10*time.Second, "the receiver's verdicts", func() bool { return len(verdicts()) == 2 })

	got := mid.Arrivals()
	var env struct {
		Events []struct {
			ID      string            `json:"id"`
			Headers map[string]string `json:"headers"`
			Body    json.RawMessage   `json:"body"`
		} `json:"events"`
	}
	if err := json.Unmarshal(got[1].Body, &env); err != nil || len(env.Events) != 1 || env.Events[0].ID != ids[3] {
		t.Fatalf("the replay arrived as %s (%v), want an envelope of one event, id %s", got[1].Body, err, ids[3])
	}
	if err := json.Unmarshal(got[2].Body, &env); err != nil || len(env.Events) != 10 {
		t.Fatalf("second batch %s: %v", got[2].Body, err)
	}
	for i, e := range env.Events {
		if e.ID != ids[10+i] || e.Headers["X-Event-Type"] != "order.updated" || string(e.Body) != fmt.Sprintf(`{"n": %d}`, i) {
			t.Errorf("event %d: %+v, want id %s", i, e, ids[10+i])
		}
	}
	for i, v := range verdicts() {
		want := []string{ids[3] + "-" + ids[3], ids[10] + "-" + ids[19]}[i]
		if !v.Verified || v.WebhookID != want {
			t.Errorf("node receiver: %+v, want verified with webhook-id %s", v, want)
		}
	}
}

// TestTooLargeBatchIsSplit: a partner that takes
// at most 3 webhooks a request and answers 413 above that. A batch of 10
// (queued behind a pause, so that it goes whole) is split in halves down
// to what the partner takes: all 10 arrive, each once, none is a dead
// letter, and the log says the batch was split.
func TestTooLargeBatchIsSplit(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	rc.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		var els []json.RawMessage
		if json.Unmarshal(rc.Arrivals()[n-1].Body, &els) != nil || len(els) > 3 {
			http.Error(w, "at most 3 events a request", http.StatusRequestEntityTooLarge)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  %q:
    max_attempts: 1
    batch: {max_events: 10, max_wait: 1s, format: json-array}
`, rc.Host()))
	if out, err := hp.CLI("pause", rc.Host()); err != nil {
		t.Fatalf("pause: %v\n%s", err, out)
	}
	PostAll(t, hp, 10, 4, func(int) string { return rc.URL + "/orders" })
	if out, err := hp.CLI("resume", rc.Host()); err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	seen := map[string]int{}
	rc.WaitFor(t, 30*time.Second, "10 webhooks accepted", func(as []Arrival) bool {
		clear(seen)
		for _, a := range as {
			var els []json.RawMessage
			if a.Status == http.StatusOK && json.Unmarshal(a.Body, &els) == nil {
				for _, e := range els {
					seen[string(e)]++
				}
			}
		}
		return len(seen) == 10
	})
	for i := range 10 {
		if n := seen[string(WebhookBody(i))]; n != 1 {
			t.Errorf("webhook %d accepted %d times, want once", i, n)
		}
	}
	if got := rc.Arrivals(); len(got) == 0 || Count413(got) == 0 {
		t.Fatalf("no 413: the batch was not sent whole first (%d requests)", len(got))
	}
	var spool struct {
		Messages int `json:"messages"`
		Dead     int `json:"dead"`
	}
	Poll(t, 10*time.Second, "an empty spool", func() bool {
		hp.AdminJSON("/v1/spool", &spool)
		return spool.Messages == 0
	})
	var dead struct {
		Dead []json.RawMessage `json:"dead"`
	}
	hp.AdminJSON("/v1/dead", &dead)
	if len(dead.Dead) != 0 {
		t.Fatalf("%d dead letters, want none", len(dead.Dead))
	}
	Poll(t, 10*time.Second, "a log line for the split", func() bool {
		return strings.Contains(hp.Log(), "outcome=split")
	})
}

// Count413 counts arrivals answered 413.
func Count413(as []Arrival) int {
	n := 0
	for _, a := range as {
		if a.Status == http.StatusRequestEntityTooLarge {
			n++
		}
	}
	return n
}

package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The same POST sent 3 times with one Idempotency-Key gets three
// 202s with one id and reaches the partner once, with the header; a 4th
// after a kill -9 and a restart gets the same id and is not delivered.
// The key with another body gets 422 (the IETF Idempotency-Key
// draft's answer) naming the first one's id, and nothing is stored.
func TestIdempotencyKeySurvivesKill(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {dedupe_window: 1h}
`, rc.Host()))
	key := http.Header{"Idempotency-Key": {"evt_77"}}
	post := func(n int) string {
		t.Helper()
		status, h, _ := PostRaw(t, hp.Client(), rc.URL+"/orders", []byte(`{"order":42}`), key)
		id := h.Get("X-Hookpace-Id")
		if status != http.StatusAccepted || len(id) != 32 {
			t.Fatalf("POST %d: %d, id %q", n, status, id)
		}
		if dup := h.Get("X-Hookpace-Duplicate"); (n > 1) != (dup == "true") {
			t.Fatalf("POST %d: X-Hookpace-Duplicate %q", n, dup)
		}
		return id
	}
	id := post(1)
	for n := 2; n <= 3; n++ {
		if got := post(n); got != id {
			t.Fatalf("POST %d: id %s, want %s", n, got, id)
		}
	}
	if status, _, body := PostRaw(t, hp.Client(), rc.URL+"/orders", []byte(`{"order":43}`), key); status != http.StatusUnprocessableEntity ||
		!strings.Contains(string(body), id) {
		t.Fatalf("the key with another body: %d %s, want 422 naming %s", status, body, id)
	}
	rc.WaitFor(t, 30*time.Second, "the webhook delivered", func(as []Arrival) bool { return len(as) >= 1 })
	Poll(t, 10*time.Second, "an ingest line with decision=duplicate", func() bool {
		return strings.Contains(hp.Log(), "decision=duplicate")
	})
	if m := hp.Metrics(); !strings.Contains(m, fmt.Sprintf(`hookpace_ingest_deduplicated_total{host=%q} 2`, rc.Host())) ||
		!strings.Contains(m, `hookpace_ingest_requests_total{outcome="duplicate"} 2`) || !strings.Contains(m, "hookpace_dedupe_keys 1") {
		t.Fatalf("metrics lack the duplicates:\n%s", m)
	}
	var hosts struct {
		Hosts []struct {
			Host         string `json:"host"`
			Deduplicated int64  `json:"deduplicated"`
		} `json:"hosts"`
	}
	hp.AdminJSON("/v1/hosts", &hosts)
	if len(hosts.Hosts) != 1 || hosts.Hosts[0].Deduplicated != 2 {
		t.Fatalf("/v1/hosts: %+v, want 2 deduplicated", hosts.Hosts)
	}

	// Its delete is durable once the spool counts nothing queued: a kill
	// before that would deliver it again (at-least-once), not a duplicate.
	Poll(t, 10*time.Second, "the delivered webhook deleted", func() bool {
		var u struct {
			Messages int64 `json:"messages"`
		}
		hp.AdminJSON("/v1/spool", &u)
		return u.Messages == 0
	})
	hp.Kill()
	hp.Restart()
	if got := post(4); got != id {
		t.Fatalf("POST after kill -9: id %s, want %s", got, id)
	}
	// A webhook queued after the 4th arrives after it would have: once it
	// is here, a second delivery of evt_77 would be too.
	if status, after := hp.Post(hp.Client(), rc.URL+"/after", WebhookBody(9), nil); status != http.StatusAccepted || after == id {
		t.Fatalf("POST /after: %d, id %s (evt_77's is %s)", status, after, id)
	}
	rc.WaitFor(t, 30*time.Second, "the webhook sent after the 4th", func(as []Arrival) bool {
		for _, a := range as {
			if a.Path == "/after" {
				return true
			}
		}
		return false
	})
	orders := 0
	for _, a := range rc.Arrivals() {
		if a.Path == "/orders" {
			orders++
			if a.Header.Get("Idempotency-Key") != "evt_77" || string(a.Body) != `{"order":42}` {
				t.Fatalf("delivered with Idempotency-Key %q, body %s", a.Header.Get("Idempotency-Key"), a.Body)
			}
		}
	}
	if orders != 1 {
		t.Fatalf("evt_77 delivered %d times, want once", orders)
	}
	// Another key, or dedupe off by its header, stores again.
	status, h, _ := PostRaw(t, hp.Client(), rc.URL+"/orders", []byte(`{}`), http.Header{"Idempotency-Key": {"evt_78"}})
	if status != http.StatusAccepted || h.Get("X-Hookpace-Id") == id || h.Get("X-Hookpace-Duplicate") != "" {
		t.Fatalf("another key: %d, id %s, duplicate %q", status, h.Get("X-Hookpace-Id"), h.Get("X-Hookpace-Duplicate"))
	}
	long := http.Header{"Idempotency-Key": {strings.Repeat("k", 256)}}
	if status, _, _ := PostRaw(t, hp.Client(), rc.URL+"/orders", []byte(`{}`), long); status != http.StatusBadRequest {
		t.Fatalf("a 256-byte key: %d, want 400", status)
	}
}

// With the host paused, 10 updates with one coalesce key become
// one queued webhook; on resume the partner gets it once, with the last
// body, and without the coalesce header.
func TestCoalesceWhilePaused(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, `egress: {allow: ["127.0.0.0/8"]}`)
	if out, err := hp.CLI("pause", rc.Host()); err != nil {
		t.Fatalf("hookpace pause: %v\n%s", err, out)
	}
	var id string
	for n := 1; n <= 10; n++ {
		status, h, _ := PostRaw(t, hp.Client(), rc.URL+"/orders/42", []byte(fmt.Sprintf("v%d", n)),
			http.Header{"Hookpace-Coalesce-Key": {"order-42"}, "X-App": {fmt.Sprint(n)}})
		if status != http.StatusAccepted {
			t.Fatalf("update %d: %d", n, status)
		}
		if n == 1 {
			id = h.Get("X-Hookpace-Id")
		}
		if h.Get("X-Hookpace-Id") != id || (n > 1) != (h.Get("X-Hookpace-Coalesced") == "true") {
			t.Fatalf("update %d: id %s (first %s), coalesced %q", n, h.Get("X-Hookpace-Id"), id, h.Get("X-Hookpace-Coalesced"))
		}
	}
	var hosts struct {
		Hosts []struct {
			Host      string `json:"host"`
			Queued    int64  `json:"queued"`
			Coalesced int64  `json:"coalesced"`
		} `json:"hosts"`
	}
	hp.AdminJSON("/v1/hosts", &hosts)
	if len(hosts.Hosts) != 1 || hosts.Hosts[0].Queued != 1 || hosts.Hosts[0].Coalesced != 9 {
		t.Fatalf("/v1/hosts while paused: %+v, want 1 queued, 9 coalesced", hosts.Hosts)
	}
	if m := hp.Metrics(); !strings.Contains(m, fmt.Sprintf(`hookpace_ingest_coalesced_total{host=%q} 9`, rc.Host())) {
		t.Fatalf("metrics lack the coalesced updates:\n%s", m)
	}
	Poll(t, 10*time.Second, "an ingest line with decision=coalesced", func() bool {
		return strings.Contains(hp.Log(), "decision=coalesced")
	})
	if out, err := hp.CLI("resume", rc.Host()); err != nil {
		t.Fatalf("hookpace resume: %v\n%s", err, out)
	}
	rc.WaitFor(t, 30*time.Second, "order-42 delivered", func(as []Arrival) bool {
		for _, a := range as {
			if a.Path == "/orders/42" {
				return true
			}
		}
		return false
	})
	// A webhook sent now arrives after any second delivery of order-42
	// would have been made.
	if status, _ := hp.Post(hp.Client(), rc.URL+"/after", WebhookBody(1), nil); status != http.StatusAccepted {
		t.Fatalf("POST /after: %d", status)
	}
	rc.WaitFor(t, 30*time.Second, "the webhook sent after the updates", func(as []Arrival) bool {
		for _, a := range as {
			if a.Path == "/after" {
				return true
			}
		}
		return false
	})
	var got []Arrival
	for _, a := range rc.Arrivals() {
		if a.Path == "/orders/42" {
			got = append(got, a)
		}
	}
	if len(got) != 1 {
		t.Fatalf("order-42 delivered %d times, want once", len(got))
	}
	a := got[0]
	if string(a.Body) != "v10" || a.Header.Get("X-App") != "10" || a.Header.Get("Hookpace-Coalesce-Key") != "" ||
		a.Header.Get("X-Hookpace-Id") != id {
		t.Fatalf("delivered body %q, X-App %q, Hookpace-Coalesce-Key %q, id %q; want v10, 10, none, %s",
			a.Body, a.Header.Get("X-App"), a.Header.Get("Hookpace-Coalesce-Key"), a.Header.Get("X-Hookpace-Id"), id)
	}
}

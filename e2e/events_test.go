package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// opsEvent is an operational event as the events receiver got it, and
// whether the official Standard Webhooks library verified it.
type opsEvent struct {
	Type      string         `json:"type"`
	Timestamp time.Time      `json:"timestamp"`
	Data      map[string]any `json:"data"`
	ID        string         `json:"-"`
	Verified  error          `json:"-"`
}

// opsEvents decodes and verifies what the events receiver got.
func opsEvents(t *testing.T, wh *standardwebhooks.Webhook, as []Arrival) []opsEvent {
	t.Helper()
	out := make([]opsEvent, 0, len(as))
	for _, a := range as {
		var ev opsEvent
		if err := json.Unmarshal(a.Body, &ev); err != nil {
			t.Fatalf("an event that is not JSON: %q: %v", a.Body, err)
		}
		ev.ID, ev.Verified = a.Header.Get("Webhook-Id"), wh.Verify(a.Body, a.Header)
		out = append(out, ev)
	}
	return out
}

func findEvent(evs []opsEvent, typ, host string) (opsEvent, bool) {
	for _, ev := range evs {
		if ev.Type == typ && (host == "" || ev.Data["host"] == host) {
			return ev, true
		}
	}
	return opsEvent{}, false
}

// A partner that always answers 500: its breaker opens and its webhook
// dies, and the events receiver gets both, signed with events.sign and
// verified by the official Standard Webhooks Go library; the partner's
// URL comes redacted. Then the spool goes past its high-water mark behind
// a paused host, and back under its low-water mark once resumed: two more
// events, the first stored while webhooks were refused.
func TestOperationalEvents(t *testing.T) {
	t.Parallel()
	secret := filepath.Join(t.TempDir(), "ops-whsec")
	if err := os.WriteFile(secret, []byte(e2eWhsec+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wh, err := standardwebhooks.NewWebhook(e2eWhsec)
	if err != nil {
		t.Fatal(err)
	}
	ops := NewReceiver(t)
	failing := NewReceiver(t)
	failing.Handle = func(w http.ResponseWriter, r *http.Request, _ int) { w.WriteHeader(http.StatusInternalServerError) }
	slow := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
spool: {max_messages: 40, high_water: 0.5, low_water: 0.25}
events:
  url: %s/hookpace
  sign: {scheme: standard-webhooks, secret_file: %s}
hosts:
  %q: {backoff_initial: 10ms, backoff_max: 20ms, max_attempts: 3, breaker_failures: 1, breaker_cooldown: 50ms}
`, ops.URL, secret, failing.Host()))
	c := hp.Client()
	status, id := hp.Post(c, failing.URL+"/orders?api_key=SECRET", WebhookBody(1), nil)
	if status != http.StatusAccepted {
		t.Fatalf("POST: %d", status)
	}
	var evs []opsEvent
	ops.WaitFor(t, 20*time.Second, "message.dead and breaker.opened events", func(as []Arrival) bool {
		evs = opsEvents(t, wh, as)
		_, dead := findEvent(evs, "message.dead", failing.Host())
		_, opened := findEvent(evs, "breaker.opened", failing.Host())
		return dead && opened
	})
	dead, _ := findEvent(evs, "message.dead", failing.Host())
	if dead.Verified != nil || dead.ID == "" {
		t.Errorf("message.dead: the official library refuses it (webhook-id %q): %v", dead.ID, dead.Verified)
	}
	if dead.Data["id"] != id || dead.Data["url"] != failing.URL+"/orders?api_key=REDACTED" ||
		dead.Data["attempts"] != float64(3) || dead.Data["last_status"] != float64(500) ||
		!strings.HasPrefix(dead.Data["reason"].(string), "max_attempts 3 reached") || dead.Timestamp.IsZero() {
		t.Errorf("message.dead: %+v; want the id %s, the URL redacted, 3 attempts, the last 500", dead, id)
	}
	for _, a := range ops.Arrivals() {
		if strings.Contains(string(a.Body), "SECRET") {
			t.Errorf("an event carries the secret: %s", a.Body)
		}
	}
	if ev, _ := findEvent(evs, "breaker.opened", failing.Host()); ev.Verified != nil || ev.Data["reason"] != "status 500" {
		t.Errorf("breaker.opened: %+v", ev)
	}
	watermarks(t, hp, wh, ops, slow)
}

// watermarks fills the spool behind a paused host until webhooks are
// refused, then resumes it: spool.high_water, then spool.low_water.
func watermarks(t *testing.T, hp *Hookpace, wh *standardwebhooks.Webhook, ops, slow *Receiver) {
	t.Helper()
	if out, err := hp.CLI("pause", slow.Host()); err != nil {
		t.Fatalf("pause: %v\n%s", err, out)
	}
	c := hp.Client()
	refused := 0
	for i := 0; refused == 0; i++ {
		if i > 40 {
			t.Fatal("40 webhooks accepted by a spool of 40 with high_water 0.5")
		}
		if status, _ := hp.Post(c, fmt.Sprintf("%s/w/%d", slow.URL, i), WebhookBody(i), nil); status != http.StatusAccepted {
			refused = status
		}
	}
	var evs []opsEvent
	ops.WaitFor(t, 20*time.Second, "spool.high_water event", func(as []Arrival) bool {
		evs = opsEvents(t, wh, as)
		_, ok := findEvent(evs, "spool.high_water", "")
		return ok
	})
	high, _ := findEvent(evs, "spool.high_water", "")
	if high.Verified != nil || high.Data["high_water"] != 0.5 || high.Data["max_messages"] != float64(40) {
		t.Errorf("spool.high_water: %+v (webhooks refused with %d)", high, refused)
	}
	if out, err := hp.CLI("resume", slow.Host()); err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	ops.WaitFor(t, 20*time.Second, "spool.low_water event", func(as []Arrival) bool {
		evs = opsEvents(t, wh, as)
		_, ok := findEvent(evs, "spool.low_water", "")
		return ok
	})
	if low, _ := findEvent(evs, "spool.low_water", ""); low.Verified != nil || low.Data["low_water"] != 0.25 {
		t.Errorf("spool.low_water: %+v", low)
	}
}

// A partner that answers 429 with a long Retry-After is held past
// events.held_after: host.held. Then hookpace stops and hands off what is
// queued to another hookpace, which delivers the handoff.ended event too,
// signed by the same events.sign, as replicas of one config would.
func TestHeldAndHandoffEvents(t *testing.T) {
	t.Parallel()
	secret := filepath.Join(t.TempDir(), "ops-whsec")
	if err := os.WriteFile(secret, []byte(e2eWhsec+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wh, err := standardwebhooks.NewWebhook(e2eWhsec)
	if err != nil {
		t.Fatal(err)
	}
	ops := NewReceiver(t)
	partner := NewReceiver(t)
	partner.Handle = func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Retry-After", "60")
		w.WriteHeader(http.StatusTooManyRequests)
	}
	common := fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
events:
  url: %s/hookpace
  sign: {scheme: standard-webhooks, secret_file: %s}
  held_after: 1s
`, ops.URL, secret)
	b := Start(t, common)
	a := Start(t, common+fmt.Sprintf("shutdown: {timeout: 10s, drain: 0s, handoff: \"http://%s\"}\n", b.Proxy))
	if status, _ := a.Post(a.Client(), partner.URL+"/held", WebhookBody(1), nil); status != http.StatusAccepted {
		t.Fatalf("POST: %d", status)
	}
	var evs []opsEvent
	ops.WaitFor(t, 20*time.Second, "host.held event", func(as []Arrival) bool {
		evs = opsEvents(t, wh, as)
		_, ok := findEvent(evs, "host.held", partner.Host())
		return ok
	})
	held, _ := findEvent(evs, "host.held", partner.Host())
	if held.Verified != nil || held.Data["held_until"] == nil || held.Data["queued"] != float64(1) {
		t.Errorf("host.held: %+v", held)
	}
	a.Signal(syscall.SIGTERM)
	if code := a.Wait(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d, want 0 (all handed off)\n%s", code, a.Log())
	}
	ops.WaitFor(t, 20*time.Second, "handoff.ended event, delivered by the other hookpace", func(as []Arrival) bool {
		evs = opsEvents(t, wh, as)
		_, ok := findEvent(evs, "handoff.ended", "")
		return ok
	})
	ended, _ := findEvent(evs, "handoff.ended", "")
	if ended.Verified != nil || ended.Data["handed_off"] != float64(1) || ended.Data["left"] != float64(0) ||
		ended.Data["target"] != "http://"+b.Proxy {
		t.Errorf("handoff.ended: %+v", ended)
	}
}

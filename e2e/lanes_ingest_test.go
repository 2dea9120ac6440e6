package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// laneHeaderNames are hookpace's lane headers: read at ingest,
// never sent to the partner.
var laneHeaderNames = []string{"Hookpace-Fairness-Key", "Hookpace-Ordering-Key", "Hookpace-Priority", "Hookpace-Delay", "Hookpace-Not-Before"}

// The lane headers never reach the partner, to a
// host with fairness keys or without, and a Hookpace-Priority hookpace
// cannot honour is a 400 that says why, with nothing stored.
func TestLaneHeadersNeverReachPartner(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	keyed := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 100/s}
  "%s": {rate: 100/s, fairness: {key: header}}
`, rc.Host(), keyed.Host()))
	c := hp.Client()
	past := time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)
	all := func(prio, timing, value string) http.Header {
		return http.Header{"Hookpace-Fairness-Key": {"tenant-a"}, "Hookpace-Ordering-Key": {"order-1"},
			"Hookpace-Priority": {prio}, timing: {value}, "X-App": {"kept"}}
	}
	for i, h := range []http.Header{all("normal", "Hookpace-Not-Before", past), all("high", "Hookpace-Delay", "0")} {
		for _, target := range []string{rc.URL, keyed.URL} {
			if status, _ := hp.Post(c, fmt.Sprintf("%s/hook/%d", target, i), WebhookBody(i), h); status != http.StatusAccepted {
				t.Fatalf("POST %s with %v: %d, want 202", target, h, status)
			}
		}
	}

	status, _, body := PostRaw(t, c, rc.URL+"/bad", WebhookBody(9), http.Header{"Hookpace-Priority": {"urgent"}})
	if status != http.StatusBadRequest || !strings.Contains(string(body), "Hookpace-Priority must be given once, as high, normal or low") {
		t.Fatalf("Hookpace-Priority: urgent: %d %q, want 400 saying what it may be", status, body)
	}

	for _, r := range []*Receiver{rc, keyed} {
		r.WaitFor(t, 10*time.Second, "both webhooks delivered", func(as []Arrival) bool { return Delivered2xx(as) >= 2 })
		for _, a := range r.Arrivals() {
			if a.Path == "/bad" {
				t.Errorf("the refused webhook was delivered")
			}
			if a.Header.Get("X-App") != "kept" {
				t.Errorf("%s: the app's own header was not delivered", a.Path)
			}
			for _, name := range laneHeaderNames {
				if v, ok := a.Header[name]; ok {
					t.Errorf("%s reached the partner with %s: %q", a.Path, name, v)
				}
			}
		}
	}
}

// With fairness.max_queued_per_key, one key's producer gets 429
// with a Retry-After from its key's share of the host's rate, while other
// keys are still accepted; the metrics count it as its own outcome.
func TestMaxQueuedPerKeyE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 1/s, fairness: {key: header, max_queued_per_key: 3}}
`, rc.Host()))
	// Paused, the host's queue stays as the test fills it.
	if out, err := hp.CLI("pause", rc.Host()); err != nil {
		t.Fatalf("pause: %v\n%s", err, out)
	}
	c := hp.Client()
	post := func(key string) (int, string, string) {
		status, h, body := PostRaw(t, c, rc.URL+"/hook", WebhookBody(1), http.Header{"Hookpace-Fairness-Key": {key}})
		return status, h.Get("Retry-After"), string(body)
	}
	for i := range 3 {
		if status, _, body := post("A"); status != http.StatusAccepted {
			t.Fatalf("A's webhook %d: %d %s", i, status, body)
		}
	}
	// A alone has 3 queued, at 1/s: 3 s.
	if status, ra, body := post("A"); status != http.StatusTooManyRequests || ra != "3" || !strings.Contains(body, "queue full for fairness key") {
		t.Fatalf("A's 4th: %d, Retry-After %q, %q; want 429, 3, queue full for fairness key", status, ra, body)
	}
	if status, _, body := post("B"); status != http.StatusAccepted {
		t.Fatalf("B beside a full A: %d %s, want 202", status, body)
	}
	// Two keys share the host now: A's 3 at 1/2 per second, 6 s.
	if status, ra, _ := post("A"); status != http.StatusTooManyRequests || ra != "6" {
		t.Fatalf("A's 5th: %d, Retry-After %q; want 429, 6", status, ra)
	}
	if m := hp.Metrics(); !strings.Contains(m, `hookpace_ingest_requests_total{outcome="rejected_key_full"} 2`) {
		t.Errorf("metrics do not count 2 rejected_key_full:\n%s", grepLines(m, "hookpace_ingest_requests_total"))
	}
}

package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// Receivers de-duplicate on X-Hookpace-Id: an id is never handed out
// twice, even across a kill -9 that left only the oldest messages queued
// (a reused id would have the new webhook dropped as a repeat).
func TestIDsNotReusedAfterKill9(t *testing.T) {
	t.Parallel()
	held, live := NewReceiver(t), NewReceiver(t)
	hp := Start(t, `egress: {allow: ["127.0.0.0/8"]}`)
	if out, err := hp.CLI("pause", held.Host()); err != nil {
		t.Fatalf("hookpace pause: %v\n%s", err, out)
	}
	c := hp.Client()
	var highest uint64
	var spoolPart string // the first 16 of an id's 32 hex digits: the spool's identity, kept across restarts
	post := func(rc *Receiver, i int) uint64 {
		t.Helper()
		status, id := hp.Post(c, fmt.Sprintf("%s/k/%d", rc.URL, i), WebhookBody(i), nil)
		if len(id) != 32 {
			t.Fatalf("webhook %d: %d, id %q, want 32 hex digits", i, status, id)
		}
		n, err := strconv.ParseUint(id[16:], 16, 64)
		if status != http.StatusAccepted || err != nil || spoolPart != "" && id[:16] != spoolPart {
			t.Fatalf("webhook %d: %d, id %q (spool part before: %q)", i, status, id, spoolPart)
		}
		spoolPart = id[:16]
		return n
	}
	for i := 1; i <= 10; i++ {
		rc := held
		if i > 5 {
			rc = live
		}
		highest = max(highest, post(rc, i))
	}
	live.WaitFor(t, 10*time.Second, "webhooks 6..10 delivered", func(as []Arrival) bool { return Delivered2xx(as) == 5 })
	Poll(t, 10*time.Second, "the delivered webhooks deleted", func() bool {
		var sp struct {
			Messages int64 `json:"messages"`
		}
		hp.AdminJSON("/v1/spool", &sp)
		return sp.Messages == 5
	})
	hp.Kill()
	hp.Restart()
	c = hp.Client()
	id := post(live, 11)
	if id <= highest {
		t.Fatalf("id %016x after kill -9, want above %016x: an id handed out before is reused", id, highest)
	}
	live.WaitFor(t, 10*time.Second, "webhook 11 delivered", func(as []Arrival) bool { return Delivered2xx(as) == 6 })
	if got := live.Arrivals()[5].Header.Get("X-Hookpace-Id"); got != fmt.Sprintf("%s%016x", spoolPart, id) {
		t.Fatalf("webhook 11 delivered with X-Hookpace-Id %q, want %s%016x", got, spoolPart, id)
	}
}

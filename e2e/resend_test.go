package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// journal.bodies: true keeps a delivered webhook's request; `hookpace msg
// resend ID` queues it again, after a restart too, and the partner gets
// the same request (method, path and query, headers, body) under the same
// X-Hookpace-Id. A webhook delivered before bodies were on can't be.
func TestMsgResend(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	cfg := `
egress: {allow: ["127.0.0.0/8"]}
journal: {bodies: %t}
`
	hp := Start(t, fmt.Sprintf(cfg, false))
	c := hp.Client()
	body := []byte(`{"order":7}`)
	hdr := http.Header{"Content-Type": {"application/json"}, "X-Order": {"7"}}
	_, before := hp.Post(c, rc.URL+"/orders?sig=abc", body, hdr)
	rc.WaitFor(t, 10*time.Second, "the first webhook", func(as []Arrival) bool { return Delivered2xx(as) == 1 })
	stopCleanly(t, hp)
	rewrite(t, hp, fmt.Sprintf(cfg, true))
	hp.Restart()
	c = hp.Client()
	status, id := hp.Post(c, rc.URL+"/orders?sig=abc", body, hdr)
	if status != http.StatusAccepted {
		t.Fatalf("POST: %d", status)
	}
	rc.WaitFor(t, 10*time.Second, "the second webhook", func(as []Arrival) bool { return Delivered2xx(as) == 2 })
	stopCleanly(t, hp)
	hp.Restart() // the kept request is durable
	if out, err := hp.CLI("msg", "resend", before); err == nil || !strings.Contains(out, "no request body kept") {
		t.Errorf("resend of a webhook delivered without journal.bodies: %v\n%s", err, out)
	}
	out, err := hp.CLI("msg", "resend", id, "--json")
	if err != nil {
		t.Fatalf("msg resend: %v\n%s", err, out)
	}
	var res struct{ ID, Host string }
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.ID != id || res.Host != rc.Host() {
		t.Fatalf("msg resend answered %s (%v); want id %s, host %s", out, err, id, rc.Host())
	}
	rc.WaitFor(t, 10*time.Second, "the resent webhook", func(as []Arrival) bool { return Delivered2xx(as) == 3 })
	first, again := rc.Arrivals()[1], rc.Arrivals()[2]
	if again.Method != "POST" || again.Path != first.Path || string(again.Body) != string(body) ||
		again.Header.Get("X-Order") != "7" || again.Header.Get("X-Hookpace-Id") != id || first.Header.Get("X-Hookpace-Id") != id {
		t.Errorf("resent %s %s %q %v; first %s %v", again.Method, again.Path, again.Body, again.Header, first.Path, first.Header)
	}
	if out, err := hp.CLI("msg", "resend", "00000000000000ff"); err == nil || !strings.Contains(out, "no such webhook") {
		t.Errorf("resend of an unknown id: %v\n%s", err, out)
	}
}

// stopCleanly stops hp gracefully: it exits 0 with nothing left.
func stopCleanly(t *testing.T, hp *Hookpace) {
	t.Helper()
	hp.Signal(syscall.SIGTERM)
	if code := hp.Wait(30 * time.Second); code != 0 {
		t.Fatalf("exit %d\n%s", code, hp.Log())
	}
}

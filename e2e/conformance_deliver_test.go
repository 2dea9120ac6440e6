package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// The target `http://partner/hook?a=1#%^` (a '#' and a bad escape), at
// the proxy listener and at an inbound route that spools every POST: 400
// with the connection closed, nothing stored, and a plain webhook to the
// same partner sent after it arrives within 5 s.
func TestFragmentTargetRefusedAtTheDoors(t *testing.T) {
	t.Parallel()
	partner, app := NewReceiver(t), NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
inbound:
  - name: every
    listen: 127.0.0.1:0
    to: %s
`, app.URL))
	addrs := inboundAddrs(t, hp)
	doors := map[string]conformanceDoor{
		"door": {dial: func() (net.Conn, error) { return net.DialTimeout("tcp", hp.Proxy, 10*time.Second) },
			target: func(p string) string { return partner.URL + p }, host: partner.Host(), rc: partner},
		"inbound": {dial: func() (net.Conn, error) { return net.DialTimeout("tcp", addrs["every"], 10*time.Second) },
			target: func(p string) string { return p }, host: addrs["every"], rc: app},
	}
	for _, name := range []string{"door", "inbound"} {
		d := doors[name]
		raw := "POST " + d.target("/hook") + "?a=1#%^ HTTP/1.1\r\nHost: " + d.host + "\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
		if a := sendRaw(d, raw); a.status != http.StatusBadRequest || !a.closed {
			t.Errorf("%s: the #%%^ target got %+v, want 400 and the connection closed", name, a)
		}
		sent := time.Now()
		plain := "POST " + d.target("/plain") + " HTTP/1.1\r\nHost: " + d.host + "\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
		if a := sendRaw(d, plain); a.status != http.StatusAccepted {
			t.Fatalf("%s: the plain webhook got %+v", name, a)
		}
		d.rc.WaitFor(t, 5*time.Second, name+": the plain webhook", func(as []Arrival) bool { return len(as) > 0 })
		t.Logf("%s: the plain webhook arrived %v after it was sent", name, d.rc.Arrivals()[0].At.Sub(sent).Round(time.Millisecond))
		for _, a := range d.rc.Arrivals() {
			if a.Path != "/plain" {
				t.Errorf("%s: %s reached the partner", name, a.Path)
			}
		}
	}
}

// A stored webhook that can't be sent (its URL holds "#%^", as one
// accepted before the door refused them was stored; written into the
// spool while hookpace is down) is dead-lettered on its first try with
// the reason, and the 10 webhooks queued behind it for the same host
// arrive within 2 s: the host's breaker (which opens at its first
// failure here) and auto-pause never hear of it.
func TestUnbuildableRecordIsDeadAtOnce(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.1"]}
hosts:
  %q: {rate: 100/s, burst: 10, concurrency: 1, breaker_failures: 1, breaker_cooldown: 1m, auto_pause_after: 1ms}
`, rc.Host()))
	hp.Kill()
	sp, err := spool.Open(spool.Options{Dir: filepath.Join(hp.Dir, "spool"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	bad := &spool.Message{Host: rc.Host(), Method: "POST", URL: rc.URL + "/hook?a=1#%^",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"bad":true}`), Enqueued: time.Now()}
	if err := sp.Append(context.Background(), bad, 0); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		m := &spool.Message{Host: rc.Host(), Method: "POST", URL: fmt.Sprintf("%s/behind/%d", rc.URL, i),
			Header: http.Header{"Content-Type": {"application/json"}}, Body: WebhookBody(i), Enqueued: time.Now()}
		if err := sp.Append(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	hp.Restart()
	rc.WaitFor(t, 2*time.Second, "the 10 webhooks behind the unbuildable one", func(as []Arrival) bool { return Delivered2xx(as) == 10 })
	// The bound is WaitFor's: a webhook retried with backoff at the head
	// would hold the others past it.
	t.Logf("the 10 webhooks behind it arrived within %v of the restart (its start-up included)", rc.Arrivals()[9].At.Sub(started).Round(time.Millisecond))
	var dead struct {
		Total int
		Dead  []struct {
			URL, Reason string
			Attempts    int
		}
	}
	// Buried on a write of its own, which the deliveries behind it need
	// not wait for.
	Poll(t, 10*time.Second, "a dead letter", func() bool { hp.AdminJSON("/v1/dead", &dead); return dead.Total > 0 })
	if dead.Total != 1 || !strings.Contains(dead.Dead[0].Reason, "cannot be sent as stored") || dead.Dead[0].Attempts != 1 {
		t.Fatalf("dead letters: %+v, want the unbuildable one, dead on its first try with the reason", dead)
	}
	var host struct {
		Breaker string
		Paused  bool
	}
	hp.AdminJSON("/v1/hosts/"+rc.Host(), &host)
	if host.Breaker != "closed" || host.Paused {
		t.Errorf("host %+v: the webhook's own failure counted against its host", host)
	}
	for _, a := range rc.Arrivals() {
		if strings.HasPrefix(a.Path, "/hook") {
			t.Errorf("the unbuildable webhook reached the partner as %s", a.Path)
		}
	}
}

package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRefusalsFromOutsideE2E checks from outside, with the real binary:
// a Hookpace-Delay whose seconds overflow a duration is refused with 400
// (it was a negative delay: 202 and delivered at once); a pass-through
// CONNECT to a name that does not resolve is answered 502 with the reason,
// never 200 and a dropped tunnel; and an http:// token_url is warned of
// at start, by field and line.
func TestRefusalsFromOutsideE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := StartEnv(t, []string{"HP_FAULTS_TOKEN_SECRET=s3cret"}, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
defaults: {connect: tunnel}
hosts:
  "%s": {rate: 50/s}
  tok.example:
    auth:
      oauth2:
        token_url: http://127.0.0.1:9/token
        client_id: hookpace
        client_secret_env: HP_FAULTS_TOKEN_SECRET
`, rc.Host()))

	for _, delay := range []string{"9223372036.854775807", "9223372036", "-1s"} {
		status, _, body := PostRaw(t, hp.Client(), rc.URL+"/overflow", WebhookBody(0), http.Header{"Hookpace-Delay": {delay}})
		if status != http.StatusBadRequest || !strings.Contains(string(body), "Hookpace-Delay") {
			t.Errorf("Hookpace-Delay: %s: %d %s, want 400 naming the header", delay, status, body)
		}
	}
	if status, _, body := PostRaw(t, hp.Client(), rc.URL+"/after", WebhookBody(1), http.Header{"Hookpace-Delay": {"0.5"}}); status != http.StatusAccepted {
		t.Fatalf("a delay of 0.5 s: %d %s", status, body)
	}
	rc.WaitFor(t, 30*time.Second, "the webhook sent after the refused ones", func(as []Arrival) bool {
		return len(as) > 0
	})
	for _, a := range rc.Arrivals() {
		if a.Path != "/after" {
			t.Errorf("%s arrived: a refused delay was delivered", a.Path)
		}
	}

	conn, err := tunnelDial(hp.Proxy, "nonexistent.invalid:443", "")
	var te *tunnelError
	if !errors.As(err, &te) || te.status != http.StatusBadGateway || !strings.Contains(te.body, "does not resolve") {
		if conn != nil {
			conn.Close()
		}
		t.Errorf("CONNECT nonexistent.invalid:443 (connect: tunnel): %v, want 502 saying the name does not resolve", err)
	}
	Poll(t, 30*time.Second, "the CONNECT's log line", func() bool {
		return strings.Contains(hp.Log(), "cannot open a tunnel to nonexistent.invalid:443")
	})

	log := hp.Log()
	if !strings.Contains(log, "token endpoint over plain http") || !strings.Contains(log, `hosts[\"tok.example\"].auth.oauth2.token_url is http://`) {
		t.Errorf("no warning of the http:// token_url at start:\n%s", log)
	}
}

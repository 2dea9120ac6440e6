package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestUnresolvedHostHeldE2E: a webhook to a name that never
// resolves (.invalid) gets its 202, then the host is held with reason dns,
// escalating along hold_schedule, instead of spending the message's
// attempts; /v1/hosts, hookpace status and the status page say dns, and
// the client histogram's error_type is dns.
func TestUnresolvedHostHeldE2E(t *testing.T) {
	t.Parallel()
	const host = "no-such-host.invalid"
	hp := Start(t, `
defaults: {max_attempts: 2, backoff_initial: 100ms, backoff_max: 100ms, hold_schedule: [300ms, 600ms, 1h]}
`)
	code, id := hp.Post(hp.Client(), "http://"+host+"/hook", []byte(`{"n":1}`), nil)
	if code != http.StatusAccepted || id == "" {
		t.Fatalf("POST to %s: %d, id %q; want 202 with an id", host, code, id)
	}
	// Three NXDOMAINs: 300 ms, 600 ms, then an hour's hold. With
	// max_attempts 2 the message would be a dead letter after two.
	var st struct {
		Queued     int        `json:"queued"`
		HeldUntil  *time.Time `json:"held_until"`
		HoldReason string     `json:"hold_reason"`
		Breaker    string     `json:"breaker"`
		LastError  string     `json:"last_error"`
	}
	Poll(t, 20*time.Second, "held for the schedule's third step", func() bool {
		hp.AdminJSON("/v1/hosts/"+host, &st)
		return st.HeldUntil != nil && time.Until(*st.HeldUntil) > 50*time.Minute
	})
	if st.Queued != 1 || st.HoldReason != "dns" || st.Breaker != "closed" || !strings.HasPrefix(st.LastError, "dns: no such host") {
		t.Fatalf("/v1/hosts/%s: %+v; want 1 queued, held for dns, breaker closed, last error dns", host, st)
	}
	var dead struct {
		Total int `json:"total"`
	}
	hp.AdminJSON("/v1/dead", &dead)
	if dead.Total != 0 {
		t.Fatalf("%d dead letters; the held message must keep its attempts", dead.Total)
	}
	out, err := hp.CLI("status")
	if err != nil || !strings.Contains(out, host) || !strings.Contains(out, ", dns)") {
		t.Fatalf("hookpace status (err %v) does not show the dns hold:\n%s", err, out)
	}
	resp, err := http.Get("http://" + hp.Admin + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "dns for ") {
		t.Fatalf("the status page does not show the dns hold:\n%s", page)
	}
	if m := hp.Metrics(); !strings.Contains(m, `error_type="dns"`) {
		t.Fatalf("no error_type=\"dns\" in /metrics:\n%s", m)
	}
	for _, line := range strings.Split(hp.Log(), "\n") {
		if strings.Contains(line, "msg=delivery") && (!strings.Contains(line, "attempt=1 ") || !strings.Contains(line, "hold=dns")) {
			t.Errorf("not an unspent attempt held for dns: %s", line)
		}
	}
}

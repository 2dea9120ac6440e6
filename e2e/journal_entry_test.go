package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The journal entry, from outside: three updates with one coalesce
// key to a paused host, with a secret header, a fairness key, a priority
// and a delay. GET /v1/messages/{id} and msg show give the coalesce key
// with two replacements, the lane, and the request's headers as the app
// sent them with the secret redacted; after a restart and the delivery,
// the entry still says so (the outcome read them from its record).
func TestJournalEntryKeysLaneHeaders(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {fairness: {key: header}}
`, rc.Host()))
	if out, err := hp.CLI("pause", rc.Host()); err != nil {
		t.Fatalf("hookpace pause: %v\n%s", err, out)
	}
	var id string
	for n := 1; n <= 3; n++ {
		status, h, _ := PostRaw(t, hp.Client(), rc.URL+"/orders/7", []byte(fmt.Sprintf(`{"v":%d}`, n)), http.Header{
			"Hookpace-Coalesce-Key": {"order-7"}, "Authorization": {"Bearer s3cret"}, "X-Request-Id": {fmt.Sprint(n)},
			"Hookpace-Fairness-Key": {"tenant-1"}, "Hookpace-Priority": {"high"}, "Hookpace-Delay": {"1s"}})
		if status != http.StatusAccepted {
			t.Fatalf("update %d: %d", n, status)
		}
		if n == 1 {
			id = h.Get("X-Hookpace-Id")
		}
	}
	type entry struct {
		State      string              `json:"state"`
		Coalesce   string              `json:"coalesce_key"`
		Replaced   int                 `json:"replaced"`
		ReplacedAt *time.Time          `json:"replaced_at"`
		Fairness   string              `json:"fairness_key"`
		Priority   string              `json:"priority"`
		NotBefore  *time.Time          `json:"not_before"`
		Header     map[string][]string `json:"request_headers"`
	}
	var m entry
	check := func(state string) {
		t.Helper()
		m = entry{} // what the answer leaves out is not kept from the last
		hp.AdminJSON("/v1/messages/"+id, &m)
		if m.State != state || m.Coalesce != "order-7" || m.Replaced != 2 || m.ReplacedAt == nil || m.Fairness != "tenant-1" ||
			m.Priority != "high" || m.NotBefore == nil || strings.Join(m.Header["Authorization"], "") != "REDACTED" ||
			strings.Join(m.Header["X-Request-Id"], "") != "3" {
			t.Fatalf("GET /v1/messages/%s: %+v", id, m)
		}
		out, err := hp.CLI("msg", "show", id)
		if err != nil || !strings.Contains(out, "coalesce  order-7 (content replaced 2 times") ||
			!strings.Contains(out, "lane      fairness key tenant-1, priority high, not before ") ||
			!strings.Contains(out, "  Authorization: REDACTED\n") || strings.Contains(out, "s3cret") {
			t.Fatalf("msg show: %v\n%s", err, out)
		}
	}
	check("held")
	hp.Signal(syscall.SIGTERM)
	hp.Wait(30 * time.Second) // exit 1: a webhook left in the spool, as it says
	hp.Restart()
	if out, err := hp.CLI("resume", rc.Host()); err != nil {
		t.Fatalf("hookpace resume: %v\n%s", err, out)
	}
	rc.WaitFor(t, 30*time.Second, "order-7 delivered", func(as []Arrival) bool { return len(as) > 0 })
	Poll(t, 10*time.Second, "the delivery in the journal", func() bool {
		hp.AdminJSON("/v1/messages/"+id, &m)
		return m.State == "delivered"
	})
	check("delivered")
	if strings.Contains(hp.Log(), "s3cret") {
		t.Fatal("a secret reached the log")
	}
}

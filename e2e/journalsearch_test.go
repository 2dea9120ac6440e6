package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// msg list --idempotency-key and --contains, and the same on GET
// /v1/messages, find one webhook among many: by its key, by a header
// value of a delivered one, by text in the body of one still queued.
func TestJournalSearchE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	held := NewReceiver(t)
	hp := Start(t, `
egress: {allow: ["127.0.0.0/8"]}
`)
	pauseHost(t, hp, held.Host())
	c := hp.Client()
	ids := map[string]string{}
	for i := range 40 {
		hdr := http.Header{"Idempotency-Key": {fmt.Sprintf("evt-%d", i)}, "X-Request-Id": {fmt.Sprintf("tenant-%d", i)}}
		status, id := hp.Post(c, rc.URL+"/orders", []byte(fmt.Sprintf(`{"order":"ord-%d"}`, i)), hdr)
		if status != http.StatusAccepted {
			t.Fatalf("POST %d: %d", i, status)
		}
		ids[fmt.Sprint(i)] = id
	}
	status, queued := hp.Post(c, held.URL+"/orders", []byte(`{"order":"needle-7731"}`), nil)
	if status != http.StatusAccepted {
		t.Fatalf("POST to the paused host: %d", status)
	}
	rc.WaitFor(t, 30*time.Second, "40 delivered", func(as []Arrival) bool { return Delivered2xx(as) == 40 })
	only := func(what, out, id string) {
		t.Helper()
		if !strings.Contains(out, id) || strings.Count(out, "\n") != 2 {
			t.Errorf("%s: want %s alone:\n%s", what, id, out)
		}
	}
	out, err := hp.CLI("msg", "list", "--idempotency-key", "evt-17")
	if err != nil {
		t.Fatalf("msg list --idempotency-key: %v\n%s", err, out)
	}
	only("msg list --idempotency-key evt-17", out, ids["17"])
	out, err = hp.CLI("msg", "list", "--contains", "tenant-23")
	if err != nil {
		t.Fatalf("msg list --contains: %v\n%s", err, out)
	}
	only("msg list --contains tenant-23 (a header)", out, ids["23"])
	out, _ = hp.CLI("msg", "list", "--contains", "needle-7731")
	only("msg list --contains needle-7731 (a queued body)", out, queued)
	for q, want := range map[string]string{
		"idempotency_key=" + url.QueryEscape("evt-5"): ids["5"],
		"contains=" + url.QueryEscape("needle-7731"):  queued,
	} {
		var list struct{ Messages []struct{ ID string } }
		hp.AdminJSON("/v1/messages?"+q, &list)
		if len(list.Messages) != 1 || list.Messages[0].ID != want {
			t.Errorf("GET /v1/messages?%s: %+v, want %s alone", q, list.Messages, want)
		}
	}
}

package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

// With auth.users, a coalesce key and an idempotency key are the proxy
// user's own: tenant A's Hookpace-Coalesce-Key never replaces tenant B's
// queued webhook, A repeating B's Idempotency-Key never gets B's id, and
// A claiming a key first never makes B's own webhook a 422.
func TestTenantKeysScopedE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
auth: {users: [{username: tenant-a, password: s3cret}, {username: tenant-b, password: s3cret}]}
hosts:
  "%s": {rate: 100/s, burst: 10}
`, rc.Host()))
	a, b := fairClient(hp, "tenant-a"), fairClient(hp, "tenant-b")
	if out, err := hp.CLI("pause", rc.Host()); err != nil {
		t.Fatalf("pause: %v\n%s", err, out)
	}

	post := func(c *http.Client, path, body string, hdr http.Header) (int, http.Header) {
		t.Helper()
		status, h, resp := PostRaw(t, c, rc.URL+path, []byte(body), hdr)
		if status != http.StatusAccepted {
			t.Fatalf("POST %s %q: %d %s", path, body, status, resp)
		}
		return status, h
	}
	coal := http.Header{"Hookpace-Coalesce-Key": {"order-42"}}
	_, hb := post(b, "/coalesce", "b's order", coal)
	_, ha := post(a, "/coalesce", "a's order", coal)
	if ha.Get("X-Hookpace-Coalesced") != "" || ha.Get("X-Hookpace-Id") == hb.Get("X-Hookpace-Id") {
		t.Errorf("a's coalesce key replaced b's webhook: id %s (b's %s), coalesced %q",
			ha.Get("X-Hookpace-Id"), hb.Get("X-Hookpace-Id"), ha.Get("X-Hookpace-Coalesced"))
	}
	// b's own update still coalesces.
	if _, h := post(b, "/coalesce", "b's order v2", coal); h.Get("X-Hookpace-Coalesced") != "true" || h.Get("X-Hookpace-Id") != hb.Get("X-Hookpace-Id") {
		t.Errorf("b's own update: id %s coalesced %q, want %s coalesced", h.Get("X-Hookpace-Id"), h.Get("X-Hookpace-Coalesced"), hb.Get("X-Hookpace-Id"))
	}

	key := func(k string) http.Header { return http.Header{"Idempotency-Key": {k}} }
	_, hb7 := post(b, "/idem", "b's evt-7", key("evt-7"))
	_, ha7 := post(a, "/idem", "b's evt-7", key("evt-7")) // the very same request, from a
	if ha7.Get("X-Hookpace-Duplicate") != "" || ha7.Get("X-Hookpace-Id") == hb7.Get("X-Hookpace-Id") {
		t.Errorf("a repeating b's key got b's id: %s (b's %s), duplicate %q",
			ha7.Get("X-Hookpace-Id"), hb7.Get("X-Hookpace-Id"), ha7.Get("X-Hookpace-Duplicate"))
	}
	post(a, "/idem", "a's evt-8", key("evt-8")) // a claims evt-8 first
	post(b, "/idem", "b's evt-8", key("evt-8")) // post fails the test on a 422
	if _, h := post(b, "/idem", "b's evt-7", key("evt-7")); h.Get("X-Hookpace-Duplicate") != "true" || h.Get("X-Hookpace-Id") != hb7.Get("X-Hookpace-Id") {
		t.Errorf("b's own repeat: id %s duplicate %q, want %s", h.Get("X-Hookpace-Id"), h.Get("X-Hookpace-Duplicate"), hb7.Get("X-Hookpace-Id"))
	}

	if out, err := hp.CLI("resume", rc.Host()); err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	want := []string{"a's evt-8", "a's order", "b's evt-7", "b's evt-7", "b's evt-8", "b's order v2"}
	rc.WaitFor(t, 30*time.Second, "every tenant's webhook", func(as []Arrival) bool { return len(as) >= len(want) })
	var got []string
	for _, ar := range rc.Arrivals() {
		got = append(got, string(ar.Body))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("delivered %q, want %q", got, want)
	}
}

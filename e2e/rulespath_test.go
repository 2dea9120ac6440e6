package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Open-world webhooks rules judge the path the partner's server routes,
// and the request goes on with that path: with rule path: /hooks/**,
// POST /hooks/../api/charge is the API call /api/charge, forwarded with
// the partner's own answer (never a 202, never spooled); //hooks/a,
// /./hooks/a, /Hooks/a, /hooks;x/a are webhooks (202 with an id) that
// arrive at /hooks/a (/Hooks/a: partners see the client's case).
func TestRulesJudgeTheCleanedPath(t *testing.T) {
	t.Parallel()
	partner := NewReceiver(t)
	partner.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("X-Partner", "yes")
		w.WriteHeader(http.StatusOK)
	}
	hp := Start(t, "egress: {allow: [\"127.0.0.0/8\"]}\nwebhooks:\n  - path: /hooks/**\n")
	host := strings.TrimPrefix(partner.URL, "http://")
	send := func(path string) *http.Response {
		c, err := net.DialTimeout("tcp", hp.Proxy, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(c, "POST http://%s%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", host, path, host)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := send("/hooks/../api/charge"); resp.StatusCode != http.StatusOK || resp.Header.Get("X-Partner") != "yes" || resp.Header.Get("X-Hookpace-Id") != "" {
		t.Errorf("POST /hooks/../api/charge: %d %v, want the partner's own 200", resp.StatusCode, resp.Header)
	}
	webhooks := map[string]string{"//hooks/a": "/hooks/a", "/./hooks/a": "/hooks/a", "/Hooks/a": "/Hooks/a", "/hooks;x/a": "/hooks/a"}
	for path := range webhooks {
		if resp := send(path); resp.StatusCode != http.StatusAccepted || resp.Header.Get("X-Hookpace-Id") == "" {
			t.Errorf("POST %s: %d %v, want 202 with an id", path, resp.StatusCode, resp.Header)
		}
	}
	partner.WaitFor(t, 20*time.Second, "the API call and 4 webhooks", func(as []Arrival) bool { return len(as) >= 5 })
	got := map[string]int{}
	for _, a := range partner.Arrivals() {
		got[a.Path]++
		if a.Path == "/api/charge" && a.Header.Get("X-Hookpace-Id") != "" {
			t.Errorf("the API call was spooled: %v", a.Header)
		}
	}
	if got["/api/charge"] != 1 || got["/hooks/a"] != 3 || got["/Hooks/a"] != 1 || len(got) != 3 {
		t.Errorf("the partner got %v; want /api/charge once, /hooks/a 3 times, /Hooks/a once", got)
	}
}

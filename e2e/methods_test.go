package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// spool.methods: PUT listed is spooled (202 with an id, delivered as a
// PUT with its body); PATCH not listed passes straight through, and
// hookpace says so once per host.
func TestSpoolMethods(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	rc.Handle = func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("X-Receiver", "yes")
		w.WriteHeader(http.StatusOK)
	}
	hp := Start(t, `
egress: {allow: ["127.0.0.0/8"]}
spool: {methods: [POST, put]}
`)
	c := hp.Client()
	send := func(method, path, body string) *http.Response {
		req, err := http.NewRequest(method, rc.URL+path, bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := send(http.MethodPut, "/put", `{"put":1}`); resp.StatusCode != http.StatusAccepted || resp.Header.Get("X-Hookpace-Id") == "" {
		t.Fatalf("PUT with PUT in spool.methods: %d, id %q; want 202 with an id", resp.StatusCode, resp.Header.Get("X-Hookpace-Id"))
	}
	rc.WaitFor(t, 10*time.Second, "the spooled PUT", func(as []Arrival) bool { return len(as) >= 1 })
	if a := rc.Arrivals()[0]; a.Method != http.MethodPut || a.Path != "/put" || string(a.Body) != `{"put":1}` {
		t.Fatalf("delivered %s %s %q, want PUT /put with its body", a.Method, a.Path, a.Body)
	}
	for i := range 2 {
		resp := send(http.MethodPatch, fmt.Sprintf("/patch/%d", i), `{"patch":1}`)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Receiver") != "yes" || resp.Header.Get("X-Hookpace-Id") != "" {
			t.Fatalf("PATCH not in spool.methods: %d %v; want the receiver's own answer", resp.StatusCode, resp.Header)
		}
	}
	const notice = "passthrough of a method that is not spooled"
	// A passthrough's ingest line is logged once it is answered, after
	// any notice for it: both PATCHes' lines say every notice is in.
	Poll(t, 5*time.Second, "the passthrough notice and both PATCHes' ingest lines", func() bool {
		return strings.Contains(hp.Log(), notice) && strings.Count(hp.Log(), "decision=passthrough status=200 method=PATCH") == 2
	})
	if n := strings.Count(hp.Log(), notice); n != 1 {
		t.Errorf("%d passthrough notices for two PATCHes to one host, want 1\n%s", n, hp.Log())
	}
	if line := logLine(hp.Log(), notice); !strings.Contains(line, "method=PATCH") || !strings.Contains(line, "host="+rc.Host()) {
		t.Errorf("notice without method and host: %s", line)
	}
	// A GET carries no webhook: no notice for it.
	send(http.MethodGet, "/get", "")
	Poll(t, 5*time.Second, "the GET's ingest line", func() bool {
		return strings.Contains(hp.Log(), "decision=passthrough status=200 method=GET")
	})
	if n := strings.Count(hp.Log(), notice); n != 1 {
		t.Errorf("%d notices after a GET, want still 1", n)
	}
}

// logLine is the first line of log that contains s.
func logLine(log, s string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

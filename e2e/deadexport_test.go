package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestDeadExport: `hookpace dead export` writes every dead letter as one
// JSON line, with its whole URL, stored headers and body (base64 when the
// body is not UTF-8), so that an operator can keep them before a volume
// goes away.
func TestDeadExport(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	rc.Handle = func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(http.StatusBadRequest) }
	hp := Start(t, `egress: {allow: ["127.0.0.0/8"]}`)
	c := hp.Client()
	bodies := map[string][]byte{
		rc.URL + "/hooks/a?x=1&y=<2>": []byte(`{"event":"a","note":"<&>"}`),
		rc.URL + "/hooks/b":           {0xff, 0x00, 0xfe, 'b'},
	}
	for target, body := range bodies {
		if code, id := hp.Post(c, target, body, http.Header{"X-Event": {"e-" + target[len(target)-1:]}}); code != http.StatusAccepted {
			t.Fatalf("POST %s: %d %s", target, code, id)
		}
	}
	Poll(t, 20*time.Second, "two dead letters", func() bool {
		var sp struct {
			Dead int `json:"dead_letters"`
		}
		hp.AdminJSON("/v1/spool", &sp)
		return sp.Dead == 2
	})

	out, err := hp.CLI("dead", "export")
	if err != nil {
		t.Fatalf("hookpace dead export: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 JSON lines, got %d:\n%s", len(lines), out)
	}
	for _, l := range lines {
		var d struct {
			ID, Host, Method, URL, Reason, Body string
			BodyBase64                          []byte `json:"body_base64"`
			Status                              int    `json:"last_status"`
			Header                              http.Header
		}
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatalf("line is not a JSON dead letter: %v\n%s", err, l)
		}
		want, ok := bodies[d.URL]
		if !ok {
			t.Errorf("exported URL %q is not one that was sent (whole URL with query expected)", d.URL)
			continue
		}
		got := []byte(d.Body)
		if d.BodyBase64 != nil {
			got = d.BodyBase64
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: body %q, want %q", d.URL, got, want)
		}
		if d.ID == "" || d.Host != rc.Host() || d.Method != "POST" || d.Status != 400 || d.Reason == "" {
			t.Errorf("%s: %+v", d.URL, d)
		}
		if h := d.Header.Get("X-Event"); h != "e-"+d.URL[len(d.URL)-1:] {
			t.Errorf("%s: X-Event %q", d.URL, h)
		}
	}

	// A selector narrows the export; a host with none exports nothing.
	if out, err := hp.CLI("dead", "export", "--host", "nobody.example"); err != nil || out != "" {
		t.Errorf("export --host nobody.example: %v %q", err, out)
	}
}

package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRemovedHeaderNeverOnDisk: a header that rewrite.headers.remove
// names is removed before the webhook is stored: after 20 delivered and 5
// dead-lettered webhooks, its value is in no file under the spool
// directory (Badger's value logs, memtables, tables, the journal and the
// dead letters, read as raw bytes), and never reached the partner. A
// partner that echoes the app's X-Jwt has its answer kept in the journal
// with the value redacted.
func TestRemovedHeaderNeverOnDisk(t *testing.T) {
	t.Parallel()
	const trace, jwt = "trace-7f3a9c-removed-value", "jwt-Kq81Zx-app-secret"
	ok := NewReceiver(t)
	bad := NewReceiver(t)
	bad.Handle = func(w http.ResponseWriter, r *http.Request, _ int) {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, "rejected; you sent X-Jwt=%s X-Internal-Trace=%q", r.Header.Get("X-Jwt"), r.Header.Get("X-Internal-Trace"))
	}
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
defaults: {rewrite: {headers: {remove: [X-Internal-Trace]}}}
hosts:
  %q: {max_attempts: 1}
`, bad.Host()))
	c := hp.Client()
	hdr := http.Header{"X-Internal-Trace": {trace}, "X-Jwt": {jwt}, "Content-Type": {"application/json"}}
	var deadIDs []string
	for i := range 25 {
		target := fmt.Sprintf("%s/hook/%d", ok.URL, i)
		if i >= 20 {
			target = fmt.Sprintf("%s/hook/%d", bad.URL, i)
		}
		status, id := hp.Post(c, target, fmt.Appendf(nil, `{"n":%d}`, i), hdr)
		if status != http.StatusAccepted || id == "" {
			t.Fatalf("webhook %d: %d, id %q", i, status, id)
		}
		if i >= 20 {
			deadIDs = append(deadIDs, id)
		}
	}
	ok.WaitFor(t, 30*time.Second, "20 deliveries", func(as []Arrival) bool { return Delivered2xx(as) >= 20 })
	Poll(t, 30*time.Second, "5 dead letters", func() bool {
		var dead struct {
			Dead []struct {
				ID string `json:"id"`
			} `json:"dead"`
		}
		hp.AdminJSON("/v1/dead", &dead)
		return len(dead.Dead) >= 5
	})
	for _, a := range append(ok.Arrivals(), bad.Arrivals()...) {
		if _, sent := a.Header["X-Internal-Trace"]; sent || a.Header.Get("X-Jwt") != jwt {
			t.Fatalf("the partner got %v: want no X-Internal-Trace, the app's X-Jwt", a.Header)
		}
	}
	out, err := hp.CLI("msg", "show", deadIDs[0])
	if err != nil || !strings.Contains(out, "you sent X-Jwt=REDACTED") || strings.Contains(out, jwt) {
		t.Errorf("msg show %s (err %v): want the echoed X-Jwt redacted\n%s", deadIDs[0], err, out)
	}

	hp.Kill()
	files, kept := 0, 0
	err = filepath.WalkDir(filepath.Join(hp.Dir, "spool"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		if bytes.Contains(b, []byte(trace)) {
			t.Errorf("%s holds the removed header's value", path)
		}
		if bytes.Contains(b, []byte(jwt)) {
			kept++ // the stored webhooks keep what is sent: the scan sees headers
		}
		return nil
	})
	if err != nil || files == 0 || kept == 0 {
		t.Fatalf("walked %d files, %d with a kept header's value: %v", files, kept, err)
	}
}

package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUnreadableRecordE2E: the real binary, its spool's value log cut
// short under the last two webhooks' bodies (as a torn power cut leaves
// a round that was never synced). Restarted and resumed, it delivers
// every other webhook, says once for each of the two that it cannot be
// read and removes it, and the host is not wedged: a webhook posted
// afterwards is delivered too.
func TestUnreadableRecordE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 1000/s, burst: 100, concurrency: 4}
`, rc.Host()))
	pauseHost(t, hp, rc.Host())
	body := func(i int) []byte { // 6 KB: in the value log
		return []byte(fmt.Sprintf(`{"event":%d,"pad":"%s"}`, i, strings.Repeat("v", 6000)))
	}
	const n = 6
	c := hp.Client()
	for i := range n {
		if status, _ := hp.Post(c, fmt.Sprintf("%s/u/%d", rc.URL, i), body(i), nil); status != http.StatusAccepted {
			t.Fatalf("POST %d: %d\n%s", i, status, hp.Log())
		}
	}
	hp.Signal(syscall.SIGTERM)
	hp.Wait(30 * time.Second) // 1: webhooks left in the spool, as meant
	if !strings.Contains(hp.Log(), "hookpace stopped") {
		t.Fatalf("hookpace did not stop cleanly\n%s", hp.Log())
	}
	vlogs, _ := filepath.Glob(filepath.Join(hp.Dir, "spool", "queue", "*.vlog"))
	if len(vlogs) == 0 {
		t.Fatal("no value-log file in the spool's queue")
	}
	last := vlogs[len(vlogs)-1]
	fi, err := os.Stat(last)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(last, fi.Size()-7000); err != nil { // into the second last body
		t.Fatal(err)
	}

	hp.Restart()
	resumeHost(t, hp, rc.Host())
	c = hp.Client()
	if status, _ := hp.Post(c, rc.URL+"/u/after", body(n), nil); status != http.StatusAccepted {
		t.Fatalf("POST after the restart: %d\n%s", status, hp.Log())
	}
	rc.WaitFor(t, 30*time.Second, "the readable webhooks delivered", func(as []Arrival) bool {
		want := map[string][]byte{"/u/after": body(n)}
		for i := range n - 2 {
			want[fmt.Sprintf("/u/%d", i)] = body(i)
		}
		for _, a := range as {
			if a.Status >= 200 && a.Status < 300 && bytes.Equal(a.Body, want[a.Path]) {
				delete(want, a.Path)
			}
		}
		return len(want) == 0
	})
	Poll(t, 10*time.Second, "the two unreadable records logged", func() bool {
		return strings.Count(hp.Log(), "a queued record cannot be read") == 2
	})
	for _, a := range rc.Arrivals() {
		if a.Path == fmt.Sprintf("/u/%d", n-2) || a.Path == fmt.Sprintf("/u/%d", n-1) {
			t.Errorf("%s delivered (%d bytes) although its body was cut off", a.Path, len(a.Body))
		}
	}
}

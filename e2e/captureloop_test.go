package e2e

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nsGet is the body of an admin GET from inside ns.
func nsGet(t *testing.T, ns *netns, url string) string {
	t.Helper()
	resp, err := ns.client().Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestCaptureLoop: the capture rules exempt uid 12345, not hookpace's
// uid 0, so hookpace's own deliveries are captured back to it. hookpace
// says so at start; an app's webhook gets 202, and each delivery of it
// captured back is refused with 508 Loop Detected: the partner gets
// nothing, no new webhook is spooled, the loop is logged once with its
// cause and listed by hookpace status. Once the rules exempt uid 0, the
// retry arrives, once.
func TestCaptureLoop(t *testing.T) {
	t.Parallel()
	ns := newNetns(t, "partner4.test")
	partner := nsReceiver(t, ns, "203.0.113.10:80", nil)
	if out, err := ns.exec(binary, "capture", "rules", "--to", "15001", "--exclude-uid", "12345", "--apply").CombinedOutput(); err != nil {
		t.Fatalf("hookpace capture rules --apply: %v\n%s", err, out)
	}
	pub := publicDir(t)
	hp := startInNetns(t, ns, fmt.Sprintf(`
capture: {listen: "127.0.0.1:15001"}
egress: {allow: ["203.0.113.10"]}
mitm: {public_dir: %s}
defaults: {backoff_initial: 200ms, backoff_max: 1s}
`, filepath.Join(pub, "trust")))
	Poll(t, 30*time.Second, "the start-up check of the rules", func() bool {
		return strings.Contains(hp.Log(), "the capture rules exempt uid 12345, not hookpace's uid 0")
	})
	c := ns.asNobody("curl", "-sS", "-o", "/dev/null", "-X", "POST", "-d", `{"n":1}`, "-w", "%{http_code} %header{x-hookpace-id}", "http://partner4.test/hooks/loop")
	c.Env = appEnv("HOME=" + pub)
	out, err := c.CombinedOutput()
	ids := sent(t, "curl", out, err, 1)

	Poll(t, 60*time.Second, "three deliveries refused as a loop", func() bool {
		return strings.Count(grepLines(hp.Log(), "decision=refused"), "status=508") >= 3
	})
	if n := len(partner.Arrivals()); n != 0 {
		t.Fatalf("the partner got %d requests during the loop", n)
	}
	m := nsGet(t, ns, "http://"+hp.Admin+"/metrics")
	if !strings.Contains(m, `hookpace_ingest_requests_total{outcome="accepted"} 1`) {
		t.Errorf("want exactly the app's webhook accepted, nothing spooled again:\n%s", grepLines(m, "hookpace_ingest_requests_total"))
	}
	if n := strings.Count(hp.Log(), "capture: loop:"); n != 1 || !strings.Contains(hp.Log(), "--exclude-uid is not hookpace's uid 0") {
		t.Errorf("%d loop lines naming the cause, want one:\n%s", n, grepLines(hp.Log(), "loop"))
	}
	status, err := ns.exec(binary, "status", "--admin", hp.Admin).CombinedOutput()
	if err != nil || !strings.Contains(string(status), "refused: 203.0.113.10:80") || !strings.Contains(string(status), "a loop") {
		t.Errorf("hookpace status does not list the loop: %v\n%s", err, status)
	}

	// The rules fixed: the next retry goes out, and arrives once.
	if out, err := ns.exec(binary, "capture", "rules", "--to", "15001", "--exclude-uid", "0", "--apply").CombinedOutput(); err != nil {
		t.Fatalf("hookpace capture rules --apply: %v\n%s", err, out)
	}
	partner.WaitFor(t, 60*time.Second, "the webhook after the fix", func(as []Arrival) bool { return len(as) >= 1 })
	as := partner.Arrivals()
	if len(as) != 1 || as[0].Header.Get("X-Hookpace-Id") != ids[0] {
		t.Errorf("arrivals after the fix: %d, want the app's webhook %s once", len(as), ids[0])
	}
}

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// pyVerdict is one line of examples/python-receiver/receiver.py.
type pyVerdict struct {
	WebhookID  string   `json:"webhook_id"`
	Status     int      `json:"status"`
	Verified   bool     `json:"verified"`
	Handled    []string `json:"handled"`
	Duplicates int      `json:"duplicates"`
	Error      string   `json:"error"`
}

// standardWebhooksPython is the official Python library's source: the
// Standard Webhooks project ships it in the same repository as its Go
// library, a test dependency in go.mod, so the module cache has it.
func standardWebhooksPython(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/standard-webhooks/standard-webhooks/libraries").Output()
	if err != nil {
		t.Fatalf("go list the standard-webhooks module: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "python")
	if _, err := os.Stat(filepath.Join(dir, "standardwebhooks", "webhooks.py")); err != nil {
		t.Fatalf("the standardwebhooks Python package is not in the module cache (go mod download): %v", err)
	}
	return dir
}

// TestPythonReceiverVerifies: the example Python receiver, verifying
// with the official standardwebhooks package, accepts what hookpace signs,
// alone and in a batch (envelope), handles each webhook once by its id,
// and refuses a request whose signature is not hookpace's.
func TestPythonReceiverVerifies(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is not installed")
	}
	cmd := exec.Command("python3", "receiver.py")
	cmd.Dir = filepath.Join("..", "examples", "python-receiver")
	cmd.Env = append(os.Environ(), "WEBHOOK_SECRET="+e2eWhsec, "PYTHONPATH="+standardWebhooksPython(t))
	base, got := startExampleReceiver[pyVerdict](t, cmd)

	secret := filepath.Join(t.TempDir(), "whsec")
	if err := os.WriteFile(secret, []byte(e2eWhsec+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(base, "http://")
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  %q:
    sign: {scheme: standard-webhooks, secret_file: %s}
    batch: {max_events: 4, max_wait: 0s, format: envelope}
`, host, secret))
	c := hp.Client()
	hdr := http.Header{"Content-Type": {"application/json"}}
	if out, err := hp.CLI("pause", host); err != nil {
		t.Fatalf("pause: %v\n%s", err, out)
	}
	var ids []string
	for i := range 4 {
		status, id := hp.Post(c, base+"/hooks", []byte(fmt.Sprintf(`{"n": %d}`, i)), hdr)
		if status != http.StatusAccepted {
			t.Fatalf("POST %d: %d", i, status)
		}
		ids = append(ids, id)
	}
	if out, err := hp.CLI("resume", host); err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	Poll(t, 20*time.Second, "the batch verified", func() bool { return len(got()) == 1 })

	// A request hookpace did not sign: refused.
	req, _ := http.NewRequest("POST", base+"/hooks", strings.NewReader(`{"n": 9}`))
	req.Header.Set("webhook-id", "forged")
	req.Header.Set("webhook-timestamp", fmt.Sprint(time.Now().Unix()))
	req.Header.Set("webhook-signature", "v1,bm90IGEgc2lnbmF0dXJl")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a forged signature got %d, want 400", resp.StatusCode)
	}
	Poll(t, 10*time.Second, "the forged request's verdict", func() bool { return len(got()) == 2 })

	v := got()
	if b := v[0]; !b.Verified || b.WebhookID != ids[0]+"-"+ids[3] || !slices.Equal(b.Handled, ids) {
		t.Errorf("batch verdict %+v, want verified, webhook-id %s-%s, each of %v handled", b, ids[0], ids[3], ids)
	}
	if f := v[1]; f.Verified || f.Status != http.StatusBadRequest || f.Error == "" {
		t.Errorf("forged verdict %+v, want refused", f)
	}
}

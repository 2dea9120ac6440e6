package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/kubetest"
)

// TestInjectorWithinLimits: the real binary's injector answers a 1.3 MB
// AdmissionReview of a Pod of 4,000 containers × 10 env variables (a
// refusal that says why) within 2 s, its peak resident memory (VmHWM)
// at most 64 MiB above what it was idle; a Pod at the limits (256
// containers, 4,096 env entries) is injected within the same bounds, and
// one past them is refused.
func TestInjectorWithinLimits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	caPEM := serveCert(t, dir)
	port := kubetest.FreePort(t)
	cmd := exec.Command(binary, "injector", "--image", "reg/hookpace:0.2.0", "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--tls-cert", filepath.Join(dir, "tls.crt"), "--tls-key", filepath.Join(dir, "tls.key"), "--namespace", "hookpace-system")
	var logb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logb, &logb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("injector's log:\n%s", logb.String())
		}
	})
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 60 * time.Second}
	url := fmt.Sprintf("https://127.0.0.1:%d/inject", port)
	Poll(t, 20*time.Second, "the injector answering", func() bool {
		resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/healthz", port))
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	// Idle: one small review served, so that the handler's first use is
	// in the baseline.
	if _, msg := doorsReview(t, client, url, doorsBigPod(1, 1, 0)); msg != "" {
		t.Fatalf("a one-container Pod was refused: %s", msg)
	}
	idle := vmHWM(t, cmd.Process.Pid)

	for _, tc := range []struct {
		containers, env, pad int
		refused              string
	}{
		{4000, 10, 0, "4000 containers, more than the 256"},
		{256, 16, 0, ""},
		{64, 65, 0, "4160 env entries, more than the 4096"},
		{64, 16, 460, ""}, // about 500 KiB: long values
		{64, 16, 520, "bytes of JSON, more than the 524288"},
	} {
		review := doorsBigPod(tc.containers, tc.env, tc.pad)
		start := time.Now()
		patched, msg := doorsReview(t, client, url, review)
		took := time.Since(start)
		hwm := vmHWM(t, cmd.Process.Pid)
		t.Logf("%d containers × %d env (%d bytes): %v, VmHWM %d MiB (idle %d MiB), patched %v, refusal %q",
			tc.containers, tc.env, len(review), took, hwm>>20, idle>>20, patched, msg)
		switch {
		case tc.refused != "" && !strings.Contains(msg, tc.refused):
			t.Errorf("%d containers: refusal %q, want one saying %q", tc.containers, msg, tc.refused)
		case tc.refused == "" && (!patched || msg != ""):
			t.Errorf("%d containers × %d env: not injected (%q)", tc.containers, tc.env, msg)
		}
		if took > 2*time.Second*slack {
			t.Errorf("%d containers × %d env: answered in %v, want within 2 s", tc.containers, tc.env, took)
		}
		if hwm-idle > 64<<20 {
			t.Errorf("%d containers × %d env: VmHWM %d MiB, more than 64 MiB above idle (%d MiB)", tc.containers, tc.env, hwm>>20, idle>>20)
		}
	}
}

// doorsBigPod is an AdmissionReview of a labelled Pod of n containers
// with env variables each, each value pad bytes longer.
func doorsBigPod(n, env, pad int) []byte {
	var b strings.Builder
	b.WriteString(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","kind":{"group":"","version":"v1","kind":"Pod"},` +
		`"resource":{"group":"","version":"v1","resource":"pods"},"namespace":"shop","operation":"CREATE","object":` +
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"big","namespace":"shop","labels":{"hookpace.dev/inject":"enabled"}},"spec":{"containers":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"c%d","image":"registry.example.com/app:1","env":[`, i)
		for j := range env {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"name":"VAR_%d","value":"value-%d-%d%s"}`, j, i, j, strings.Repeat("x", pad))
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`],"restartPolicy":"Always"}}}}`)
	return []byte(b.String())
}

// doorsReview posts review and says whether the answer patched the Pod,
// and the refusal's message ("" when allowed).
func doorsReview(t *testing.T, c *http.Client, url string, review []byte) (bool, string) {
	t.Helper()
	resp, err := c.Post(url, "application/json", bytes.NewReader(review))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Response struct {
			Allowed bool   `json:"allowed"`
			Patch   []byte `json:"patch"`
			Status  struct {
				Message string `json:"message"`
			} `json:"status"`
		} `json:"response"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	if !out.Response.Allowed && out.Response.Status.Message == "" {
		t.Fatal("refused without a message")
	}
	return len(out.Response.Patch) > 0, out.Response.Status.Message
}

// vmHWM is the peak resident set size of process pid, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

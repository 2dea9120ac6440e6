package e2e

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInstanceAndCanonicalLinesE2E: hookpace status with no
// --admin takes the admin address from --config or $HOOKPACE_CONFIG and
// says which instance answered (spool directory, start time) and what came
// through it; /v1/instance counts ingests and passthrough requests; every
// ingest decision's line (spooled, passthrough, tunnel, origin-form) has
// the canonical keys the README lists; the stop line counts them too.
func TestInstanceAndCanonicalLinesE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	tlsRc := NewTLSReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {connect: tunnel}
`, tlsRc.Host()))
	spoolDir := regexp.MustCompile(`msg="hookpace started".* spool=(\S+)`).FindStringSubmatch(hp.Log())
	if spoolDir == nil {
		t.Fatalf("no spool in the started line:\n%s", hp.Log())
	}
	// A config naming this instance's admin listener, as an operator's would.
	cfgPath := filepath.Join(t.TempDir(), "ops.yaml")
	writeConfig(t, cfgPath, "127.0.0.1:0", hp.Admin, filepath.Join(t.TempDir(), "other-spool"), "")
	status := func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command(binary, append([]string{"status"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("hookpace status %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := status(nil, "--config", cfgPath)
	if !strings.Contains(out, "instance: http://"+hp.Admin) || !strings.Contains(out, "spool "+spoolDir[1]) ||
		!strings.Contains(out, "started ") || !strings.Contains(out, "through hookpace since the start: nothing") {
		t.Fatalf("status --config: want the instance at %s with spool %s and nothing through it:\n%s", hp.Admin, spoolDir[1], out)
	}

	c := hp.Client()
	if code, _ := hp.Post(c, rc.URL+"/spooled", []byte(`{}`), nil); code != http.StatusAccepted {
		t.Fatalf("POST: %d", code)
	}
	resp, err := c.Get(rc.URL + "/passed")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("passthrough GET: %d, want the receiver's 200", resp.StatusCode)
	}
	conn, err := tunnelDial(hp.Proxy, tlsRc.Host(), "")
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(conn, &tls.Config{RootCAs: pool(tlsRc), ServerName: "127.0.0.1"})
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(tc, "GET /tls HTTP/1.1\r\nHost: "+tlsRc.Host()+"\r\nConnection: close\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(tc), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("TLS through a tunnel: %v %v", resp, err)
	}
	tc.Close()
	u, _ := url.Parse("http://" + hp.Proxy + "/origin-form")
	if resp, err := http.Post(u.String(), "text/plain", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("origin-form POST: %d, want 400", resp.StatusCode)
	}

	var inst struct {
		SpoolDir string           `json:"spool_dir"`
		Started  time.Time        `json:"started_at"`
		Ingest   map[string]int64 `json:"ingest"`
	}
	Poll(t, 5*time.Second, "the tunnel counted", func() bool {
		hp.AdminJSON("/v1/instance", &inst)
		return inst.Ingest["passthrough"] == 2
	})
	if inst.SpoolDir != spoolDir[1] || inst.Started.IsZero() || time.Since(inst.Started) > time.Hour ||
		inst.Ingest["accepted"] != 1 || inst.Ingest["bad_request"] != 1 {
		t.Fatalf("/v1/instance: %+v; want spool %s, a start time, 1 accepted, 2 passthrough, 1 bad request", inst, spoolDir[1])
	}
	out = status([]string{"HOOKPACE_CONFIG=" + cfgPath})
	if !strings.Contains(out, "spool "+spoolDir[1]) || !strings.Contains(out, "4 requests: 1 spooled, 2 passthrough, 1 other") {
		t.Fatalf("status with HOOKPACE_CONFIG: want this instance and its counts:\n%s", out)
	}

	hp.Signal(syscall.SIGTERM)
	hp.Wait(30 * time.Second)
	keys := []string{"decision=", "status=", "method=", "host=", "bytes=", "duration_us=", "remote="}
	decisions := map[string]bool{}
	for _, line := range strings.Split(hp.Log(), "\n") {
		if !strings.Contains(line, "msg=ingest") {
			continue
		}
		for _, k := range keys {
			if !strings.Contains(line, " "+k) {
				t.Errorf("ingest line without %s: %s", k, line)
			}
		}
		if m := regexp.MustCompile(`decision=(\S+)`).FindStringSubmatch(line); m != nil {
			decisions[m[1]] = true
		}
	}
	for _, d := range []string{"accepted", "passthrough", "tunnel", "bad_request"} {
		if !decisions[d] {
			t.Errorf("no ingest line with decision=%s:\n%s", d, hp.Log())
		}
	}
	if !regexp.MustCompile(`msg="hookpace stopped".* spooled=1 passthrough=2`).MatchString(hp.Log()) {
		t.Errorf("the stop line does not count the traffic:\n%s", hp.Log())
	}
}

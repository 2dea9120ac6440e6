package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// adminDo sends one request to hp's admin API with the given headers and
// returns the status and body.
func adminDo(t *testing.T, hp *Hookpace, method, path, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+hp.Admin+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// deadLetters makes n dead letters on hp: webhooks to a receiver that
// answers 410, to URLs carrying ?sig=SECRET-n.
func deadLetters(t *testing.T, hp *Hookpace, rc *Receiver, n int) {
	t.Helper()
	PostAll(t, hp, n, n, func(i int) string { return fmt.Sprintf("%s/gone/%d?sig=SECRET-%d", rc.URL, i, i) })
	Poll(t, 10*time.Second, "dead letters", func() bool { total, _ := failDeadList(t, hp); return total == n })
}

func goneReceiver(t *testing.T) *Receiver {
	rc := NewReceiver(t)
	rc.Handle = func(w http.ResponseWriter, r *http.Request, _ int) { w.WriteHeader(http.StatusGone) }
	return rc
}

// A web page's form cannot pause a host or purge dead letters,
// and what the listing shows of URLs keeps their query values hidden.
func TestAdminRefusesCrossSiteForms(t *testing.T) {
	t.Parallel()
	rc := goneReceiver(t)
	hp := Start(t, `egress: {allow: ["127.0.0.0/8"]}`)
	deadLetters(t, hp, rc, 2)
	H := rc.Host()

	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	evil := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://evil.example"}
	fetchMeta := map[string]string{"Content-Type": "text/plain", "Sec-Fetch-Site": "cross-site"}
	// Even the CLI's header does not make a request from another site good.
	evilHeader := map[string]string{"X-Hookpace-Admin": "1", "Origin": "http://evil.example"}
	sameSite := map[string]string{"X-Hookpace-Admin": "1", "Sec-Fetch-Site": "same-site"}
	for _, path := range []string{"/v1/hosts/" + H + "/pause", "/v1/dead/purge?all=1", "/v1/dead/replay?all=1"} {
		for name, hdr := range map[string]map[string]string{"form": form, "evil origin": evil,
			"cross-site fetch": fetchMeta, "evil origin with header": evilHeader, "same-site": sameSite} {
			status, body := adminDo(t, hp, "POST", path, "x=1", hdr)
			if status != http.StatusForbidden {
				t.Errorf("%s POST %s: %d %s, want 403", name, path, status, body)
			}
		}
	}
	if total, _ := failDeadList(t, hp); total != 2 {
		t.Errorf("after refused purges: %d dead letters, want 2", total)
	}
	var st struct{ Paused bool }
	hp.AdminJSON("/v1/hosts/"+H, &st)
	if st.Paused {
		t.Errorf("host %s paused by a refused form", H)
	}

	// Without a token, listings hide query values.
	out, err := hp.CLI("dead", "list", "--json")
	if err != nil || strings.Contains(out, "SECRET") || !strings.Contains(out, "sig=REDACTED") {
		t.Errorf("dead list without a token shows query values (or no redaction mark): %v\n%s", err, out)
	}

	// The CLI itself still works; so does a same-origin JSON request.
	if out, err := hp.CLI("pause", "http://"+H+"/some/path?x=1"); err != nil {
		t.Fatalf("hookpace pause URL: %v\n%s", err, out)
	}
	hp.AdminJSON("/v1/hosts/"+H, &st)
	if !st.Paused {
		t.Errorf("hookpace pause http://%s/...: host %s not paused", H, H)
	}
	status, body := adminDo(t, hp, "POST", "/v1/hosts/"+H+"/resume", "{}",
		map[string]string{"Content-Type": "application/json", "Origin": "http://" + hp.Admin})
	if status != http.StatusOK {
		t.Errorf("same-origin JSON resume: %d %s", status, body)
	}
	if out, err := hp.CLI("dead", "purge", "--all"); err != nil || !strings.Contains(out, "2") {
		t.Errorf("hookpace dead purge --all: %v\n%s", err, out)
	}
}

// A DNS-rebinding page names its own host; every admin path
// refuses it, while loopback names and addresses are served.
func TestAdminRefusesForeignHost(t *testing.T) {
	t.Parallel()
	hp := Start(t, ``)
	post := map[string]string{"Host": "rebind.example", "X-Hookpace-Admin": "1"}
	for _, req := range []struct{ method, path string }{
		{"GET", "/healthz"}, {"GET", "/readyz"}, {"GET", "/metrics"}, {"GET", "/v1/hosts"},
		{"GET", "/v1/hosts/a.example"}, {"GET", "/v1/spool"}, {"GET", "/v1/dead"}, {"GET", "/"},
		{"POST", "/v1/hosts/a.example/pause"}, {"POST", "/v1/hosts/a.example/resume"},
		{"POST", "/v1/dead/replay?all=1"}, {"POST", "/v1/dead/purge?all=1"},
	} {
		for _, host := range []string{"rebind.example", "rebind.example:" + strings.Split(hp.Admin, ":")[1], "127.0.0.1.nip.io"} {
			post["Host"] = host
			if status, body := adminDo(t, hp, req.method, req.path, "", post); status != http.StatusForbidden {
				t.Errorf("%s %s with Host %s: %d %s, want 403", req.method, req.path, host, status, body)
			}
		}
	}
	var hosts struct{ Hosts []any }
	hp.AdminJSON("/v1/hosts", &hosts)
	if len(hosts.Hosts) != 0 {
		t.Errorf("refused pauses created hosts: %v", hosts.Hosts)
	}
	for _, host := range []string{"localhost", "localhost:9", "127.0.0.1", "[::1]:80", hp.Admin} {
		if status, body := adminDo(t, hp, "GET", "/v1/spool", "", map[string]string{"Host": host}); status != http.StatusOK {
			t.Errorf("GET /v1/spool with Host %s: %d %s, want 200", host, status, body)
		}
	}
}

// With admin.token_file, the API wants the token (probes and
// metrics excepted), the CLI sends it when told where it is, and listings
// show whole URLs to the token's holder.
func TestAdminToken(t *testing.T) {
	t.Parallel()
	rc := goneReceiver(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	const token = "s3cret-admin-token-0123456789"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hp := Start(t, fmt.Sprintf("egress: {allow: [\"127.0.0.0/8\"]}\nadmin: {token_file: %q}\n", tokenFile))

	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if status, body := adminDo(t, hp, "GET", path, "", nil); status != http.StatusOK {
			t.Errorf("GET %s without token: %d %s, want 200", path, status, body)
		}
	}
	for _, auth := range []string{"", "Bearer wrong-token-wrong-token", "Basic " + token} {
		hdr := map[string]string{"Authorization": auth, "X-Hookpace-Admin": "1"}
		for _, r := range []struct{ method, path string }{{"GET", "/v1/hosts"}, {"GET", "/v1/dead"}, {"POST", "/v1/dead/purge?all=1"}} {
			if status, body := adminDo(t, hp, r.method, r.path, "", hdr); status != http.StatusUnauthorized {
				t.Errorf("%s %s with Authorization %q: %d %s, want 401", r.method, r.path, auth, status, body)
			}
		}
	}
	if out, err := hp.CLI("status"); err == nil || !strings.Contains(out, "token") {
		t.Errorf("hookpace status without a token: %v\n%s", err, out)
	}
	if out, err := hp.CLI("status", "--token-file", tokenFile); err != nil {
		t.Errorf("hookpace status --token-file: %v\n%s", err, out)
	}
	// The token file named by the config, from --config or HOOKPACE_CONFIG.
	if out, err := exec.Command(binary, "status", "--config", hp.Config, "--admin", hp.Admin).CombinedOutput(); err != nil {
		t.Errorf("hookpace status --config: %v\n%s", err, out)
	}
	cmd := exec.Command(binary, "dead", "export", "--admin", hp.Admin)
	cmd.Env = append(os.Environ(), "HOOKPACE_CONFIG="+hp.Config)
	PostAll(t, hp, 1, 1, func(int) string { return rc.URL + "/gone/0?sig=SECRET-0" })
	Poll(t, 10*time.Second, "a dead letter", func() bool {
		out, err := exec.Command(binary, "dead", "list", "--json", "--config", hp.Config, "--admin", hp.Admin).CombinedOutput()
		return err == nil && strings.Contains(string(out), `"total": 1`)
	})
	out, err := cmd.Output()
	var d struct{ URL string }
	if err != nil || json.Unmarshal(out, &d) != nil || !strings.HasSuffix(d.URL, "?sig=SECRET-0") {
		t.Errorf("dead export with the token (HOOKPACE_CONFIG): want the whole URL: %v\n%s", err, out)
	}
	// A listing, even with the token, hides query values unless asked.
	status, body := adminDo(t, hp, "GET", "/v1/dead", "", map[string]string{"Authorization": "Bearer " + token})
	if status != http.StatusOK || strings.Contains(body, "SECRET") || !strings.Contains(body, "sig=REDACTED") {
		t.Errorf("GET /v1/dead with the token: %d %s", status, body)
	}
}

// An admin listener off loopback needs a token, or an explicit
// admin.insecure_no_auth; without either, hookpace does not start.
func TestAdminNonLoopbackNeedsToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hookpace.yaml")
	write := func(s string) {
		if err := os.WriteFile(cfg, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(fmt.Sprintf("listen: 127.0.0.1:0\nadmin: 0.0.0.0:0\nspool: {dir: %s}\n", filepath.Join(dir, "spool")))
	for _, args := range [][]string{{"check-config", cfg}, {"run", "--config", cfg}} {
		cmd := exec.Command(binary, args...)
		done := make(chan struct{})
		var out []byte
		var err error
		go func() { out, err = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("hookpace %s with a non-loopback admin and no token is still running", args[0])
		}
		if err == nil || !strings.Contains(string(out), "admin.token_file") || !strings.Contains(string(out), "insecure_no_auth") {
			t.Errorf("hookpace %s with admin on 0.0.0.0 and no token: %v\n%s", args[0], err, out)
		}
	}
	write(fmt.Sprintf("admin: {listen: \"0.0.0.0:9090\", insecure_no_auth: true}\nspool: {dir: %s}\n", filepath.Join(dir, "spool")))
	if out, err := exec.Command(binary, "check-config", cfg).CombinedOutput(); err != nil {
		t.Errorf("check-config with admin.insecure_no_auth: %v\n%s", err, out)
	}
}

// Pause takes a host, host:port or URL, refuses junk, and bounds
// how many hosts outside the config it keeps paused.
func TestAdminPauseHostsValidatedAndBounded(t *testing.T) {
	t.Parallel()
	hp := Start(t, "hosts:\n  configured.example: {}\n")
	hdr := map[string]string{"X-Hookpace-Admin": "1"}
	for _, junk := range []string{"not%20a%20host", "a..b", "ftp:%2F%2Fx.example%2F", "x.example:99999", "%2A.example"} {
		if status, body := adminDo(t, hp, "POST", "/v1/hosts/"+junk+"/pause", "", hdr); status != http.StatusBadRequest {
			t.Errorf("pause %s: %d %s, want 400", junk, status, body)
		}
	}
	if out, err := hp.CLI("pause", "HTTPS://Partner.Example.:443/hook?x=1"); err != nil || out != "partner.example: paused\n" {
		t.Errorf("hookpace pause URL: %v\n%s", err, out)
	}
	var st struct{ Paused bool }
	hp.AdminJSON("/v1/hosts/partner.example", &st)
	if !st.Paused {
		t.Error("partner.example not paused by its URL")
	}
	// Flags before the command, as "hookpace --config F pause HOST": the
	// config names the admin listener the command talks to.
	cfgFile := filepath.Join(t.TempDir(), "ops.yaml")
	if err := os.WriteFile(cfgFile, []byte("admin: "+hp.Admin+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(binary, "--config", cfgFile, "pause", "configured.example").CombinedOutput(); err != nil ||
		string(out) != "configured.example: paused\n" {
		t.Errorf("hookpace --config F pause HOST: %v\n%s", err, out)
	}
	hp.AdminJSON("/v1/hosts/configured.example", &st)
	if !st.Paused {
		t.Error("configured.example not paused by hookpace --config F pause")
	}
	if out, err := exec.Command(binary, "--admin", hp.Admin, "resume", "configured.example").CombinedOutput(); err != nil {
		t.Errorf("hookpace --admin A resume HOST: %v\n%s", err, out)
	}
	const max = 1000 // admin.DefaultMaxPaused; partner.example is one
	for i := 1; i < max; i++ {
		if status, body := adminDo(t, hp, "POST", fmt.Sprintf("/v1/hosts/junk%d.example/pause", i), "", hdr); status != http.StatusOK {
			t.Fatalf("pause junk%d.example: %d %s", i, status, body)
		}
	}
	if status, body := adminDo(t, hp, "POST", "/v1/hosts/one-too-many.example/pause", "", hdr); status != http.StatusConflict {
		t.Errorf("pause of host %d not in the config: %d %s, want 409", max+1, status, body)
	}
	for _, ok := range []string{"junk1.example", "configured.example"} { // already paused; in the config
		if status, body := adminDo(t, hp, "POST", "/v1/hosts/"+ok+"/pause", "", hdr); status != http.StatusOK {
			t.Errorf("pause %s at the bound: %d %s, want 200", ok, status, body)
		}
	}
	if out, err := hp.CLI("resume", "junk1.example"); err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	if status, body := adminDo(t, hp, "POST", "/v1/hosts/one-too-many.example/pause", "", hdr); status != http.StatusOK {
		t.Errorf("pause after a resume made room: %d %s, want 200", status, body)
	}
}

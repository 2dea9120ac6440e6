package e2e

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/procenv"
)

// MITM with an operator CA, upgrade_tls, SSRF refusals,
// proxy auth, and hookpace's own listeners as forbidden targets.

// TestMITMWithOperatorCA: `hookpace ca init` makes a CA; an app that trusts
// it POSTs https:// through hookpace (curl and a Go client), gets 202 from
// hookpace itself, and the receiver gets the webhook over verified TLS.
func TestMITMWithOperatorCA(t *testing.T) {
	t.Parallel()
	caDir := filepath.Join(t.TempDir(), "ca")
	out, err := exec.Command(binary, "ca", "init", "--dir", caDir, "--unconstrained").CombinedOutput()
	if err != nil {
		t.Fatalf("hookpace ca init: %v\n%s", err, out)
	}
	caCert, caKey := filepath.Join(caDir, "ca.crt"), filepath.Join(caDir, "ca.key")
	if _, err := os.Stat(caCert); err != nil {
		t.Fatalf("ca init wrote no certificate: %v", err)
	}
	fi, err := os.Stat(caKey)
	if err != nil {
		t.Fatalf("ca init wrote no key: %v", err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Fatalf("ca.key mode %v, want 0600", mode)
	}

	rc := NewTLSReceiver(t)
	var overTLS atomic.Int64
	rc.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		if r.TLS == nil || !r.TLS.HandshakeComplete {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		overTLS.Add(1)
		w.WriteHeader(http.StatusOK)
	}
	trust := []string{"SSL_CERT_FILE=" + secRootsPEM(t, rc.Certificate())}
	hp := StartEnv(t, trust, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
mitm: {ca_cert: %s, ca_key: %s}
hosts:
  "%s": {connect: mitm, rate: 100/s}
`, caCert, caKey, rc.Host()))

	want := 0
	if curl, err := exec.LookPath("curl"); err != nil {
		t.Log("curl not installed: skipping the curl client")
	} else {
		cmd := exec.Command(curl, "-sS", "--max-time", "20", "--proxy", "http://"+hp.Proxy, "--cacert", caCert,
			"-H", "Content-Type: application/json", "-d", `{"via":"curl"}`,
			"-w", "\n%{http_code}", rc.URL+"/hook/curl")
		cmd.Env = procenv.WithoutProxy()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("curl through hookpace: %v\n%s\n%s", err, out, hp.Log())
		}
		text := strings.TrimSpace(string(out))
		i := strings.LastIndex(text, "\n")
		body, code := strings.TrimSpace(text[:max(i, 0)]), text[i+1:]
		if code != "202" {
			t.Fatalf("curl got %s, want 202 from hookpace: %s", code, body)
		}
		var ack struct{ ID, Status string }
		if err := json.Unmarshal([]byte(body), &ack); err != nil || ack.ID == "" {
			t.Fatalf("curl: 202 body %q is not hookpace's JSON with an id (%v)", body, err)
		}
		t.Logf("curl: 202 id %s", ack.ID)
		want++
	}

	pool := x509.NewCertPool()
	pem, err := os.ReadFile(caCert)
	if err != nil {
		t.Fatal(err)
	}
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no PEM certificate", caCert)
	}
	proxyURL, _ := url.Parse("http://" + hp.Proxy)
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		Proxy:           http.ProxyURL(proxyURL),
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}}
	status, hdr, body := PostRaw(t, c, rc.URL+"/hook/go", []byte(`{"via":"go"}`), nil)
	if status != http.StatusAccepted {
		t.Fatalf("Go client over MITM: status %d, want 202: %s", status, body)
	}
	var ack struct{ ID string }
	if err := json.Unmarshal(body, &ack); err != nil || ack.ID == "" || hdr.Get("X-Hookpace-Id") != ack.ID {
		t.Fatalf("Go client: 202 body %q / X-Hookpace-Id %q: want hookpace's JSON with the same id", body, hdr.Get("X-Hookpace-Id"))
	}
	want++

	rc.WaitFor(t, 10*time.Second, fmt.Sprintf("%d deliveries over TLS", want), func(as []Arrival) bool { return Delivered2xx(as) >= want })
	if n := overTLS.Load(); n != int64(want) {
		t.Fatalf("%d deliveries over TLS, want %d", n, want)
	}
	for _, a := range rc.Arrivals() {
		switch a.Path {
		case "/hook/curl":
			if string(a.Body) != `{"via":"curl"}` {
				t.Fatalf("curl webhook body %q", a.Body)
			}
		case "/hook/go":
			if string(a.Body) != `{"via":"go"}` {
				t.Fatalf("Go webhook body %q", a.Body)
			}
		default:
			t.Fatalf("unexpected arrival %s %s", a.Method, a.Path)
		}
	}
}

// TestUpgradeTLS: a host with upgrade_tls gets http:// webhooks over
// https://, and only with a certificate hookpace trusts.
func TestUpgradeTLS(t *testing.T) {
	t.Parallel()
	t.Run("trusted", func(t *testing.T) {
		rc := NewTLSReceiver(t)
		var overTLS atomic.Int64
		rc.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
			if r.TLS != nil {
				overTLS.Add(1)
			}
		}
		trust := []string{"SSL_CERT_FILE=" + secRootsPEM(t, rc.Certificate())}
		hp := StartEnv(t, trust, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {upgrade_tls: true}
`, rc.Host()))
		if status, _ := hp.Post(hp.Client(), "http://"+rc.Host()+"/hook", []byte("up"), nil); status != http.StatusAccepted {
			t.Fatalf("POST http://%s/hook: status %d, want 202", rc.Host(), status)
		}
		rc.WaitFor(t, 10*time.Second, "delivery over TLS", func(as []Arrival) bool { return Delivered2xx(as) >= 1 })
		a := rc.Arrivals()[0]
		if a.Path != "/hook" || string(a.Body) != "up" || overTLS.Load() != 1 {
			t.Fatalf("arrival %s %q, over TLS %d: want /hook \"up\" over TLS", a.Path, a.Body, overTLS.Load())
		}
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		rc := NewTLSReceiver(t)
		hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {upgrade_tls: true, backoff_initial: 100ms}
`, rc.Host()))
		if status, _ := hp.Post(hp.Client(), "http://"+rc.Host()+"/hook", []byte("up"), nil); status != http.StatusAccepted {
			t.Fatalf("status %d, want 202", status)
		}
		var st secHostRow
		Poll(t, 10*time.Second, "a certificate error on "+rc.Host(), func() bool {
			st = secHost(t, hp, rc.Host())
			return st.LastError != ""
		})
		if !strings.Contains(strings.ToLower(st.LastError), "certificate") {
			t.Errorf("last_error %q does not mention the certificate", st.LastError)
		}
		if st.Queued != 1 {
			t.Errorf("queued %d, want the webhook kept for retry", st.Queued)
		}
		if n := rc.Count(nil); n != 0 {
			t.Fatalf("%d requests reached the receiver through an unverified TLS connection", n)
		}
		t.Logf("last_error: %s", st.LastError)
	})
}

// TestSSRFRefused: without an egress allowance, private, loopback,
// link-local and unspecified destinations are refused at intake with 403
// and a reason, and are never contacted; an allowance opens loopback.
func TestSSRFRefused(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	_, port, _ := net.SplitHostPort(rc.Host())
	hp := Start(t, `hosts: {"closed.example": {connect: deny}}`)
	c := hp.Client()
	targets := []string{
		"http://127.0.0.1:" + port + "/",
		"http://localhost:" + port + "/",
		"http://[::1]:" + port + "/",
		"http://169.254.169.254/latest/meta-data/",
		"http://10.1.2.3/",
		"http://0.0.0.0:" + port + "/",
	}
	for _, target := range targets {
		status, _, body := PostRaw(t, c, target, []byte("ssrf"), nil)
		if status != http.StatusForbidden || !strings.Contains(string(body), "refused") {
			t.Errorf("POST %s: %d %q, want 403 with the reason", target, status, body)
			continue
		}
		t.Logf("POST %s: 403 %s", target, strings.TrimSpace(string(body)))
	}
	if u := secSpool(t, hp); u.Messages != 0 {
		t.Errorf("%d refused webhooks were spooled", u.Messages)
	}

	// CONNECT to port 443 of a host whose connect is deny is refused with
	// advice; a tunnel to a private address, as a POST would be.
	for _, tc := range []struct{ target, want string }{
		{"closed.example:443", "upgrade_tls"},
		{"closed.example:443", "hookpace ca bundle"},
		{rc.Host(), "refused: loopback"},
		{"169.254.169.254:443", "refused: cloud-metadata"},
	} {
		resp, msg := secConnect(t, hp, tc.target)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(msg, tc.want) {
			t.Errorf("CONNECT %s: %s %q, want 403 naming %q", tc.target, resp.Status, msg, tc.want)
		}
	}
	if _, err := c.Get("https://" + rc.Host() + "/"); err == nil {
		t.Errorf("GET https:// through hookpace without mitm succeeded")
	}
	if n := rc.Count(nil); n != 0 {
		t.Fatalf("%d requests reached the loopback receiver", n)
	}

	// With loopback allowed, the same receiver is reachable.
	open := Start(t, `egress: {allow: ["127.0.0.0/8"]}`)
	if status, _ := open.Post(open.Client(), rc.URL+"/allowed", []byte("ok"), nil); status != http.StatusAccepted {
		t.Fatalf("POST to loopback with 127.0.0.0/8 allowed: %d, want 202", status)
	}
	rc.WaitFor(t, 10*time.Second, "delivery to allowed loopback", func(as []Arrival) bool { return Delivered2xx(as) >= 1 })
	if as := rc.Arrivals(); len(as) != 1 || as[0].Path != "/allowed" {
		t.Fatalf("arrivals %+v, want only /allowed", as)
	}
}

// TestProxyAuth: with users configured, requests need Proxy-Authorization.
func TestProxyAuth(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, `
egress: {allow: ["127.0.0.0/8"]}
auth: {users: [{username: app, password: s3cret}]}
`)
	withUser := func(u *url.Userinfo) *http.Client {
		p, _ := url.Parse("http://" + hp.Proxy)
		p.User = u
		return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(p)}}
	}
	for _, tc := range []struct {
		name string
		user *url.Userinfo
		want int
	}{
		{"no credentials", nil, http.StatusProxyAuthRequired},
		{"wrong password", url.UserPassword("app", "wrong"), http.StatusProxyAuthRequired},
		{"unknown user", url.UserPassword("eve", "s3cret"), http.StatusProxyAuthRequired},
		{"right credentials", url.UserPassword("app", "s3cret"), http.StatusAccepted},
	} {
		status, hdr, body := PostRaw(t, withUser(tc.user), rc.URL+"/auth", []byte(tc.name), nil)
		if status != tc.want {
			t.Errorf("%s: status %d, want %d: %s", tc.name, status, tc.want, body)
			continue
		}
		if status == http.StatusProxyAuthRequired && !strings.HasPrefix(hdr.Get("Proxy-Authenticate"), "Basic") {
			t.Errorf("%s: 407 without a Basic Proxy-Authenticate challenge: %v", tc.name, hdr)
		}
	}
	rc.WaitFor(t, 10*time.Second, "the authenticated webhook", func(as []Arrival) bool { return len(as) >= 1 })
	a := rc.Arrivals()
	if len(a) != 1 || string(a[0].Body) != "right credentials" || a[0].Header.Get("Proxy-Authorization") != "" {
		t.Fatalf("arrivals %+v: want only the authenticated webhook, without its credentials", a)
	}
}

// TestSelfRefused: hookpace's own listeners are never a target, even when
// loopback is allowed.
func TestSelfRefused(t *testing.T) {
	t.Parallel()
	hp := Start(t, `egress: {allow: ["127.0.0.0/8"]}`)
	c := hp.Client()
	accepted := 0
	for _, target := range []string{"http://" + hp.Admin + "/healthz", "http://" + hp.Proxy + "/"} {
		status, _, body := PostRaw(t, c, target, []byte("loop"), nil)
		if status != http.StatusForbidden {
			t.Errorf("POST %s (hookpace's own listener): %d %q, want 403", target, status, strings.TrimSpace(string(body)))
		}
		if status == http.StatusAccepted {
			accepted++
		}
	}
	if accepted == 0 {
		return
	}
	// Say where the wrongly accepted webhooks went: delivery must still
	// refuse to dial hookpace itself.
	var dead struct {
		Total int
		Dead  []struct{ URL, Reason string }
	}
	Poll(t, 10*time.Second, "the accepted self-targeted webhooks to be dead-lettered", func() bool {
		hp.AdminJSON("/v1/dead", &dead)
		return dead.Total >= accepted
	})
	for _, d := range dead.Dead {
		t.Logf("dead letter %s: %s", d.URL, d.Reason)
	}
}

// secRootsPEM writes cert to a PEM file (for SSL_CERT_FILE) and returns its path.
func secRootsPEM(t *testing.T, cert *x509.Certificate) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "roots.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// secConnect sends a CONNECT for target to hp and returns the answer.
func secConnect(t *testing.T, hp *Hookpace, target string) (*http.Response, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", hp.Proxy, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("reading the CONNECT answer: %v", err)
	}
	msg, _ := io.ReadAll(resp.Body)
	return resp, string(msg)
}

// secHostRow is the part of GET /v1/hosts these tests read.
type secHostRow struct {
	Host      string     `json:"host"`
	Queued    int64      `json:"queued"`
	InFlight  int        `json:"in_flight"`
	HeldUntil *time.Time `json:"held_until"`
	Paused    bool       `json:"paused"`
	LastError string     `json:"last_error"`
	Breaker   string     `json:"breaker"`
}

// secHost returns host's row of /v1/hosts (zero if absent).
func secHost(t *testing.T, hp *Hookpace, host string) secHostRow {
	t.Helper()
	var v struct{ Hosts []secHostRow }
	hp.AdminJSON("/v1/hosts", &v)
	for _, h := range v.Hosts {
		if h.Host == host {
			return h
		}
	}
	return secHostRow{}
}

type secSpoolState struct {
	Messages  int64 `json:"messages"`
	Accepting bool  `json:"accepting"`
}

func secSpool(t *testing.T, hp *Hookpace) secSpoolState {
	t.Helper()
	var u secSpoolState
	hp.AdminJSON("/v1/spool", &u)
	return u
}

package e2e

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Check-config refuses exactly what run refuses. Each
// config goes to the real binary twice: `hookpace check-config --config F`
// and `hookpace run --config F`. Both exit 1 naming the same field, or
// check-config says ok and run starts.
func TestCheckConfigAgreesWithRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml string
		field      string // "" = accepted
	}{
		{"zone in egress IP", `egress: {allow: ["fe80::1%eth0"]}`, "egress.allow[0]"},
		{"numeric wildcard", `egress: {allow: ["*.123"]}`, "egress.allow[0]"},
		{"trailing hyphen in egress", `egress: {deny: ["foo-.example"]}`, "egress.deny[0]"},
		{"trailing hyphen in hosts key", `hosts: {"foo-.example": {}}`, "hosts"},
		{"numeric hosts key", `hosts: {"*.123": {}}`, "hosts"},
		{"absurd rate", `defaults: {rate: 1e308/s}`, "defaults.rate"},
		{"absurd burst", `hosts: {"a.example": {burst: 1000000000}}`, `hosts["a.example"].burst`},
		{"rates at the bounds", `{defaults: {rate: 1000000/s, burst: 1000000}, hosts: {"a.example": {rate: 0.1/h}}}`, ""},
		{"good names", `{egress: {allow: ["*.partner.example", "Partner.Example.", "::1", "10.0.0.0/8"]}, hosts: {"Partner.Example.:8443": {}, "10.0.0.5:80": {}}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := ""
			if tc.field != "" {
				want = tc.field + ":"
			}
			checkAgreesWithRun(t, tc.yaml, want)
		})
	}
}

// checkAgreesWithRun writes yaml (with loopback :0 listeners and a spool in
// a temp dir) and hands it to the real binary twice: `hookpace check-config
// --config F` and `hookpace run --config F`. With want "" both accept (run
// starts); else both exit 1 with want in their output, and run's error is
// check-config's, word for word.
func checkAgreesWithRun(t *testing.T, yaml, want string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "f.yaml")
	writeConfig(t, path, "127.0.0.1:0", "127.0.0.1:0", filepath.Join(dir, "spool"), yaml)
	checkOut, checkErr := exec.Command(binary, "check-config", "--config", path).CombinedOutput()
	started, runOut := runBriefly(t, path)
	if want == "" {
		if checkErr != nil || !started {
			t.Fatalf("want both to accept:\ncheck-config: %v\n%s\nrun started=%v:\n%s", checkErr, checkOut, started, runOut)
		}
		return
	}
	if exitCode(checkErr) != 1 || !strings.Contains(string(checkOut), want) {
		t.Errorf("check-config: %v, want exit 1 with %q:\n%s", checkErr, want, checkOut)
	}
	if started || !strings.Contains(runOut, want) {
		t.Errorf("run: started=%v, want exit 1 with %q:\n%s", started, want, runOut)
	}
	msg := strings.TrimPrefix(strings.TrimSpace(string(checkOut)), "hookpace check-config: ")
	if !strings.Contains(runOut, msg) {
		t.Errorf("run's error differs from check-config's %q:\n%s", msg, runOut)
	}
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// runBriefly runs `hookpace run --config path` until it logs "hookpace
// started" (then stops it with SIGTERM) or exits; it returns which, and
// the output.
func runBriefly(t *testing.T, path string) (started bool, out string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "run", "--config", path)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	var b strings.Builder
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "hookpace started") {
			started = true
			cmd.Process.Signal(os.Interrupt)
		}
	}
	err = cmd.Wait()
	if !started && exitCode(err) != 1 {
		t.Errorf("run neither started nor exited 1: %v", err)
	}
	return started, b.String()
}

// rawRequest sends one request line (with a Host header) to the proxy over
// a fresh connection and returns the status and body of the answer.
func rawRequest(t *testing.T, proxyAddr, method, target, host string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := ""
	if method == http.MethodPost {
		body = `{"n":1}`
	}
	_, err = c.Write([]byte(method + " " + target + " HTTP/1.1\r\nHost: " + host +
		"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A destination no delivery could reach is 400 at the
// door, with the reason, on every path: ingest, passthrough and CONNECT.
func TestUnreachableTargetIs400(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, `egress: {allow: ["127.0.0.0/8"]}`)
	for _, tc := range []struct {
		method, target, host, reason string
	}{
		{"POST", "http://127.0.0.1:99999/p", "127.0.0.1:99999", `invalid port "99999"`},
		{"POST", "http://127.0.0.1:0/p", "127.0.0.1:0", `invalid port "0"`},
		{"POST", "http://foo-.example/p", "foo-.example", "malformed host name"},
		{"POST", "http://*.123/p", "*.123", "invalid host"},
		{"POST", "ftp://127.0.0.1/p", "127.0.0.1", `unsupported scheme "ftp"`},
		{"GET", "file:///etc/passwd", "", `unsupported scheme "file"`},
		{"GET", "http://127.0.0.1:99999/p", "127.0.0.1:99999", `invalid port "99999"`},
		{"GET", "gopher://127.0.0.1/x", "127.0.0.1", `unsupported scheme "gopher"`},
		{"CONNECT", "127.0.0.1:0", "127.0.0.1:0", `invalid port "0"`},
		{"CONNECT", "foo-.example:443", "foo-.example:443", "malformed host name"},
	} {
		status, body := rawRequest(t, hp.Proxy, tc.method, tc.target, tc.host)
		if status != http.StatusBadRequest || !strings.Contains(body, tc.reason) {
			t.Errorf("%s %s: %d %q, want 400 naming %q", tc.method, tc.target, status, body, tc.reason)
		}
	}
	// A good target still gets its 202 and arrives.
	status, body := rawRequest(t, hp.Proxy, "POST", rc.URL+"/ok", rc.Host())
	if status != http.StatusAccepted {
		t.Fatalf("POST %s/ok: %d %q, want 202", rc.URL, status, body)
	}
	rc.WaitFor(t, 10*time.Second, "the good webhook", func(as []Arrival) bool { return len(as) == 1 })
	if n := rc.Count(nil); n != 1 {
		t.Errorf("receiver got %d requests, want only the good one", n)
	}
}

// Check-config loads every file run loads, with the same
// errors: a missing tls.ca_file, a private key as tls.ca_file, missing MITM
// files, a certificate that is not a CA as the MITM CA.
func TestCheckConfigLoadsFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, err := exec.Command(binary, "ca", "init", "--dir", filepath.Join(dir, "ca"), "--unconstrained").CombinedOutput()
	if err != nil {
		t.Fatalf("ca init: %v\n%s", err, out)
	}
	caCert, caKey := filepath.Join(dir, "ca", "ca.crt"), filepath.Join(dir, "ca", "ca.key")
	missing := filepath.Join(dir, "missing.pem")
	leaf := filepath.Join(dir, "leaf.pem")
	writeLeafPEM(t, leaf)
	creds := filepath.Join(dir, "creds")
	if err := os.WriteFile(creds, []byte("gw:secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, yaml, want string // want "" = accepted
	}{
		{"good CA files", "tls: {ca_file: " + caCert + "}\nmitm: {ca_cert: " + caCert + ", ca_key: " + caKey + "}", ""},
		{"missing tls.ca_file", "tls: {ca_file: " + missing + "}", "tls.ca_file: open " + missing},
		{"private key as tls.ca_file", "tls: {ca_file: " + caKey + "}", "tls.ca_file: " + caKey + ": no PEM certificates found"},
		{"missing mitm CA", "mitm: {ca_cert: " + missing + ", ca_key: " + missing + "}", "mitm.ca_cert: read CA certificate"},
		{"non-CA as mitm CA", "mitm: {ca_cert: " + leaf + ", ca_key: " + caKey + "}", "is not a CA certificate"},
		// Every file the config names, not only the CA files.
		// yaml.v3 writes the keys sorted: shutdown's second key is line 5.
		{"missing shutdown.handoff_auth_file", "shutdown: {handoff: \"http://127.0.0.1:1\", handoff_auth_file: " + missing + "}",
			"f.yaml:5: shutdown.handoff_auth_file: open " + missing},
		{"hand-off credentials", "shutdown: {handoff: \"http://127.0.0.1:1\", handoff_auth_file: " + creds + "}", ""},
		{"missing admin.token_file", "admin: {token_file: " + missing + "}", "admin.token_file: open " + missing},
		{"missing signing secret", "hosts: {a.example: {sign: {scheme: standard-webhooks, secret_file: " + missing + "}}}",
			`hosts["a.example"].sign.secret_file: open ` + missing},
		{"missing Redis password file", "fleet: {redis: \"redis://127.0.0.1:1\", redis_password_file: " + missing + "}",
			"fleet.redis_password_file: open " + missing},
	} {
		t.Run(tc.name, func(t *testing.T) { checkAgreesWithRun(t, tc.yaml, tc.want) })
	}
}

func writeLeafPEM(t *testing.T, path string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(9), Subject: pkix.Name{CommonName: "leaf.example"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A reload names each changed setting that needs a
// restart, gives the warnings a start gives, and refuses a file a start
// would refuse (the old config stays).
func TestReloadNamesRestartAndWarns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if out, err := exec.Command(binary, "ca", "init", "--dir", filepath.Join(dir, "ca"), "--unconstrained").CombinedOutput(); err != nil {
		t.Fatalf("ca init: %v\n%s", err, out)
	}
	caCert := filepath.Join(dir, "ca", "ca.crt")
	hp := Start(t, `log: {level: info}`)
	orig, err := os.ReadFile(hp.Config)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(hp.Log(), "INSECURE") {
		t.Fatalf("insecure warning before it was turned on:\n%s", hp.Log())
	}

	// A missing CA file: rejected, as a start would reject it.
	opsRewriteConfig(t, hp, string(orig)+"tls: {ca_file: "+filepath.Join(dir, "missing.pem")+"}\n")
	Poll(t, 10*time.Second, "the reload with a missing tls.ca_file to be rejected", func() bool {
		return strings.Contains(hp.Log(), "config reload rejected") && strings.Contains(hp.Log(), "tls.ca_file: open ")
	})

	// A good new CA file and insecure_skip_verify turned on.
	opsRewriteConfig(t, hp, string(orig)+"tls: {ca_file: "+caCert+"}\nhosts: {\"partner.example\": {insecure_skip_verify: true}}\n")
	Poll(t, 10*time.Second, "the reload to be applied", func() bool { return strings.Contains(hp.Log(), "config reloaded") })
	log := hp.Log()
	if !strings.Contains(log, "tls.ca_file changed: restart to apply") {
		t.Errorf("reload did not say tls.ca_file needs a restart:\n%s", log)
	}
	if !strings.Contains(log, "INSECURE") || !strings.Contains(log, "partner.example") {
		t.Errorf("insecure_skip_verify turned on by reload without the start's warning:\n%s", log)
	}
}

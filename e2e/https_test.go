package e2e

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// tlsPartner starts a receiver served over TLS with a certificate for
// names from a CA of its own, as a real partner's would be; the CA's PEM
// file is what hookpace's tls.ca_file names.
func tlsPartner(t *testing.T, names ...string) (*Receiver, string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "partner test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "partner-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	rc := &Receiver{notify: make(chan struct{}, 1)}
	rc.Server = httptest.NewUnstartedServer(http.HandlerFunc(rc.serve))
	rc.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	rc.StartTLS()
	t.Cleanup(rc.Close)
	return rc, caFile
}

// appEnv is the environment of an app that sets only the variables
// given: the test's own proxy and CA variables are dropped.
func appEnv(vars ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(name) {
		case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR",
			"REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "JAVA_TOOL_OPTIONS":
			continue
		}
		env = append(env, kv)
	}
	return append(env, vars...)
}

// sent reads a sender's "STATUS ID" lines.
func sent(t *testing.T, who string, out []byte, err error, want int) []string {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v\n%s", who, err, out)
	}
	var ids []string
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(line, "Picked up JAVA_TOOL_OPTIONS") {
			continue
		}
		if len(f) != 2 || f[0] != "202" {
			t.Fatalf("%s: answer %q, want 202 and an X-Hookpace-Id\n%s", who, line, out)
		}
		ids = append(ids, f[1])
	}
	if len(ids) != want {
		t.Fatalf("%s: %d answers, want %d\n%s", who, len(ids), want, out)
	}
	return ids
}

// busiest is the most arrivals in any window of length w.
func busiest(as []Arrival, w time.Duration) int {
	at := make([]time.Time, len(as))
	for i, a := range as {
		at[i] = a.At
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	most, j := 0, 0
	for i := range at {
		for at[i].Sub(at[j]) >= w {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

// TestHTTPSWithoutCodeChange: a partner at an https:// URL,
// served over TLS with its own certificate, and apps that only set
// environment variables: HTTPS_PROXY and the one variable that makes each
// runtime trust the bundle `hookpace ca bundle` names. Every client gets
// 202 with an id; the partner gets each webhook once, over TLS that
// hookpace verified, paced at 20/s with a burst of 5. The CA is hookpace's
// own, created on the first start, name-constrained to the partner, and
// the same after a restart; a tunnel to a host not named passes through,
// and the metric, the log, the status page and hookpace status say so.
func TestHTTPSWithoutCodeChange(t *testing.T) {
	t.Parallel()
	partner, partnerCA := tlsPartner(t, "partner.test", "other.test")
	port := partner.URL[strings.LastIndex(partner.URL, ":")+1:]
	const rate, burst, conc = 20, 5, 4
	hp := StartResolving(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.1"]}
tls: {ca_file: %s}
hosts:
  "partner.test:%s": {rate: %d/s, burst: %d, concurrency: %d}
`, partnerCA, port, rate, burst, conc), "partner.test", "other.test")
	target := "https://partner.test:" + port + "/hooks"
	proxy := "HTTPS_PROXY=http://" + hp.Proxy

	caPath := hookpaceCA(t, hp, "cert")
	bundle := hookpaceCA(t, hp, "bundle")
	trustStore := filepath.Join(filepath.Dir(bundle), "truststore.p12")
	out, err := exec.Command("openssl", "x509", "-noout", "-text", "-in", caPath).CombinedOutput()
	if err != nil {
		t.Fatalf("openssl x509: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "X509v3 Name Constraints: critical") || !strings.Contains(string(out), "DNS:partner.test") ||
		strings.Contains(string(out), "DNS:other.test") {
		t.Fatalf("the CA is not name-constrained to partner.test:\n%s", out)
	}
	caBefore, _ := os.ReadFile(caPath)
	bundleBefore, _ := os.ReadFile(bundle)

	var ids []string
	run := func(who string, cmd *exec.Cmd, n int) {
		t.Helper()
		out, err := cmd.CombinedOutput()
		ids = append(ids, sent(t, who, out, err, n)...)
	}
	curl := func(env ...string) *exec.Cmd {
		// A config file of one request per line: twenty POSTs, one curl.
		var cfg strings.Builder
		for i := 1; i <= 20; i++ {
			if i > 1 {
				cfg.WriteString("next\n")
			}
			fmt.Fprintf(&cfg, "url = %q\nrequest = POST\ndata = \"{\\\"via\\\":\\\"curl\\\",\\\"n\\\":%d}\"\nsilent\nshow-error\noutput = /dev/null\nwrite-out = \"%%{http_code} %%header{x-hookpace-id}\\n\"\n", target, i)
		}
		c := exec.Command("curl", "--config", "-")
		c.Stdin = strings.NewReader(cfg.String())
		c.Env = appEnv(env...)
		return c
	}
	run("curl (CURL_CA_BUNDLE)", curl(proxy, "CURL_CA_BUNDLE="+bundle), 20)

	py := func(code string, env ...string) *exec.Cmd {
		c := exec.Command(debianPython, "-c", code, target)
		c.Env = appEnv(env...)
		return c
	}
	run("Python requests.Session (REQUESTS_CA_BUNDLE)", py(`
import sys, requests
s = requests.Session()
for i in range(20):
    r = s.post(sys.argv[1], json={"via": "requests", "n": i})
    print(r.status_code, r.headers.get("X-Hookpace-Id"))
`, proxy, "REQUESTS_CA_BUNDLE="+bundle), 20)
	run("Python httpx (SSL_CERT_FILE)", py(`
import sys, httpx
with httpx.Client() as c:
    for i in range(5):
        r = c.post(sys.argv[1], json={"via": "httpx", "n": i})
        print(r.status_code, r.headers.get("X-Hookpace-Id"))
`, proxy, "SSL_CERT_FILE="+bundle), 5)

	node := func(script string, env ...string) *exec.Cmd {
		c := exec.Command(exampleNode(t, "node"), script, target, "5") // Node 20.18+ and the pinned packages, installed when missing
		c.Dir = "../examples/node"
		c.Env = appEnv(env...)
		return c
	}
	run("Node fetch + undici EnvHttpProxyAgent (NODE_EXTRA_CA_CERTS)", node("fetch.mjs", proxy, "NODE_EXTRA_CA_CERTS="+bundle), 5)
	run("Node axios (NODE_EXTRA_CA_CERTS)", node("axios.mjs", proxy, "NODE_EXTRA_CA_CERTS="+bundle), 5)

	goSender := filepath.Join(t.TempDir(), "gosender")
	if out, err := exec.Command("go", "build", "-o", goSender, "./testdata/gosender").CombinedOutput(); err != nil {
		t.Fatalf("build the Go sender: %v\n%s", err, out)
	}
	gc := exec.Command(goSender, target, "5")
	gc.Env = appEnv(proxy, "SSL_CERT_FILE="+bundle)
	run("Go net/http (SSL_CERT_FILE)", gc, 5)

	proxyHost, proxyPort, _ := strings.Cut(hp.Proxy, ":")
	jc := exec.Command("java", "testdata/java/Sender.java", target, "5")
	jc.Env = appEnv("JAVA_TOOL_OPTIONS=-Dhttps.proxyHost=" + proxyHost + " -Dhttps.proxyPort=" + proxyPort +
		" -Djavax.net.ssl.trustStore=" + trustStore + " -Djavax.net.ssl.trustStoreType=PKCS12 -Djavax.net.ssl.trustStorePassword=changeit")
	run("Java HttpClient (JAVA_TOOL_OPTIONS)", jc, 5)

	total := len(ids)
	partner.WaitFor(t, 60*time.Second, fmt.Sprintf("all %d webhooks at the partner", total), func(as []Arrival) bool { return len(as) >= total })
	got := map[string]int{}
	for _, a := range partner.Arrivals() {
		if !a.TLS {
			t.Errorf("webhook %s arrived without TLS", a.Header.Get("X-Hookpace-Id"))
		}
		got[a.Header.Get("X-Hookpace-Id")]++
	}
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("webhook %s arrived %d times, want once", id, got[id])
		}
	}
	if len(got) != total {
		t.Errorf("%d distinct webhooks arrived, want %d", len(got), total)
	}
	// The bucket allows burst + rate·W in any window W. The partner stamps
	// arrivals, and a stall on a loaded machine can bunch up to the
	// concurrency's worth of sends that hookpace started apart.
	if most, bound := busiest(partner.Arrivals(), time.Second), burst+rate+conc; most > bound {
		t.Errorf("busiest 1 s at the partner: %d webhooks, bound %d (burst %d + rate %d/s + concurrency %d)", most, bound, burst, rate, conc)
	} else {
		t.Logf("%d webhooks from 7 clients; busiest 1 s at the partner: %d (burst + rate = %d)", total, most, burst+rate)
	}

	// An intercepted tunnel reaches the one host its CONNECT named: a
	// request inside it for another host is refused.
	caPEM, _ := os.ReadFile(caPath)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	conn, err := tunnelDial(hp.Proxy, "partner.test:"+port, "")
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(conn, &tls.Config{RootCAs: roots, ServerName: "partner.test"})
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(tc, "POST /smuggled HTTP/1.1\r\nHost: other.test:"+port+"\r\nContent-Length: 2\r\n\r\n{}")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatalf("a request for another host inside an intercepted tunnel: %v", err)
	}
	resp.Body.Close()
	tc.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a request for other.test inside a tunnel to partner.test: %d, want 400", resp.StatusCode)
	}

	// A tunnel to a host not named in hosts passes through, unpaced, and
	// says so everywhere an operator looks.
	other := "https://other.test:" + port + "/direct"
	c := exec.Command("curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-d", "{}", other)
	c.Env = appEnv(proxy, "CURL_CA_BUNDLE="+partnerCA)
	if out, err := c.CombinedOutput(); err != nil || string(out) != "200" {
		t.Fatalf("curl through a passed-through tunnel: %v, %q; want the partner's own 200", err, out)
	}
	otherHost := "other.test:" + port
	if m := hp.Metrics(); !strings.Contains(m, `hookpace_tunnels_total{host="`+otherHost+`",mode="passthrough"} 1`) ||
		!strings.Contains(m, `hookpace_tunnels_total{host="partner.test:`+port+`",mode="intercepted"}`) {
		t.Errorf("hookpace_tunnels_total does not show the passthrough and the interceptions:\n%s", grepLines(m, "hookpace_tunnels_total"))
	}
	Poll(t, 10*time.Second, "the passthrough warning in the log", func() bool {
		return strings.Contains(hp.Log(), `level=WARN msg="connect: https passed through unpaced`) && strings.Contains(hp.Log(), "host="+otherHost)
	})
	if n := strings.Count(hp.Log(), `msg="connect: https passed through unpaced`); n != 1 {
		t.Errorf("%d passthrough warnings, want one per host", n)
	}
	if st, err := hp.CLI("status"); err != nil || !strings.Contains(st, "passed through unpaced: "+otherHost) ||
		!strings.Contains(st, "https: hookpace's CA intercepts partner.test") {
		t.Errorf("hookpace status (err %v) does not list the passthrough:\n%s", err, st)
	}
	page := getPage(t, hp)
	if !strings.Contains(page, `data-host="`+otherHost+`" data-mode="passthrough"`) || !strings.Contains(page, "passed through unpaced") {
		t.Errorf("the status page does not list %s as passed through unpaced", otherHost)
	}

	// A restart keeps the CA, so the bundle apps read before still works.
	hp.Kill()
	hp.Restart()
	caAfter, _ := os.ReadFile(hookpaceCA(t, hp, "cert"))
	if !bytes.Equal(caBefore, caAfter) {
		t.Fatal("the CA changed across a restart")
	}
	oldBundle := filepath.Join(t.TempDir(), "bundle-before-restart.pem")
	os.WriteFile(oldBundle, bundleBefore, 0o644)
	c = exec.Command("curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-d", `{"after":"restart"}`, target)
	c.Env = appEnv("HTTPS_PROXY=http://"+hp.Proxy, "CURL_CA_BUNDLE="+oldBundle)
	if out, err := c.CombinedOutput(); err != nil || string(out) != "202" {
		t.Fatalf("curl with the bundle from before the restart: %v, %q; want 202", err, out)
	}
}

// hookpaceCA runs hookpace ca cert|bundle on hp's config and returns the
// path it prints.
func hookpaceCA(t *testing.T, hp *Hookpace, which string) string {
	t.Helper()
	out, err := exec.Command(binary, "ca", which, "--config", hp.Config).CombinedOutput()
	if err != nil {
		t.Fatalf("hookpace ca %s: %v\n%s", which, err, out)
	}
	return strings.TrimSpace(string(out))
}

func grepLines(s, sub string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return strings.Join(out, "\n")
}

func getPage(t *testing.T, hp *Hookpace) string {
	t.Helper()
	resp, err := http.Get("http://" + hp.Admin + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return b.String()
}

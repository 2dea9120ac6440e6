package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testCA is a CA the test makes to issue server and client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a leaf: a server certificate for 127.0.0.1, or a client one.
func (ca *testCA) issue(t *testing.T, serial int64, client bool) (certPEM, keyPEM []byte, cert tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: fmt.Sprintf("leaf %d", serial)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	if client {
		tmpl.ExtKeyUsage, tmpl.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalPKCS8PrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}),
		tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// replaceFile writes data to path by renaming a new file over it, as a
// rotation does.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestMTLSPartner: a partner that requires a client
// certificate from a CA it trusts. Without auth.mtls the webhooks are not
// delivered and hookpace status says why; with it, all 20 arrive; after
// the files are rotated, the new certificate is presented without a
// restart.
func TestMTLSPartner(t *testing.T) {
	t.Parallel()
	serverCA, clientCA := newTestCA(t, "partner server CA"), newTestCA(t, "partner client CA")
	_, _, serverCert := serverCA.issue(t, 2, false)
	var mu sync.Mutex
	serials := map[string]int{}
	rc := &Receiver{notify: make(chan struct{}, 1)}
	rc.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		serials[r.TLS.PeerCertificates[0].SerialNumber.String()]++
		mu.Unlock()
		rc.serve(w, r)
	}))
	pool := x509.NewCertPool()
	pool.AddCert(clientCA.cert)
	rc.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	rc.StartTLS()
	t.Cleanup(rc.Close)
	host := strings.TrimPrefix(rc.URL, "https://")

	dir := t.TempDir()
	caFile, certFile, keyFile := filepath.Join(dir, "server-ca.pem"), filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	os.WriteFile(caFile, serverCA.pem, 0o644)
	c1, k1, _ := clientCA.issue(t, 101, true)
	os.WriteFile(certFile, c1, 0o600)
	os.WriteFile(keyFile, k1, 0o600)

	// Without the client certificate: refused at the handshake.
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.1"]}
tls: {ca_file: %s}
hosts:
  "%s": {upgrade_tls: true, rate: 100/s, backoff_initial: 100ms, backoff_max: 100ms, max_attempts: 100}
`, caFile, host))
	target := "http://" + host + "/hook"
	for i := range 3 {
		if code, _ := hp.Post(hp.Client(), target, fmt.Appendf(nil, `{"n":%d}`, i), nil); code != http.StatusAccepted {
			t.Fatalf("POST: %d", code)
		}
	}
	Poll(t, 20*time.Second, "hookpace status to say why nothing is delivered", func() bool {
		out, _ := hp.CLI("status")
		return strings.Contains(out, host) && strings.Contains(out, "tls")
	})
	if n := rc.Count(nil); n != 0 {
		t.Fatalf("%d webhooks delivered without the client certificate", n)
	}
	hp.Kill()

	cfg := func() string {
		return fmt.Sprintf(`
egress: {allow: ["127.0.0.1"]}
tls: {ca_file: %s}
hosts:
  "%s":
    upgrade_tls: true
    rate: 100/s
    auth: {mtls: {cert_file: %s, key_file: %s}}
`, caFile, host, certFile, keyFile)
	}
	hp = Start(t, cfg())
	for i := range 20 {
		if code, _ := hp.Post(hp.Client(), target, fmt.Appendf(nil, `{"m":%d}`, i), nil); code != http.StatusAccepted {
			t.Fatalf("POST: %d", code)
		}
	}
	rc.WaitFor(t, 30*time.Second, "20 webhooks over mTLS", func(as []Arrival) bool { return len(as) >= 20 })
	mu.Lock()
	first := serials["101"]
	mu.Unlock()
	if first != 20 {
		t.Fatalf("client certificates presented: %v; want serial 101 on all 20", serials)
	}

	// Rotate the files: the next connection presents the new certificate.
	c2, k2, _ := clientCA.issue(t, 102, true)
	replaceFile(t, keyFile, k2)
	replaceFile(t, certFile, c2)
	rc.CloseClientConnections() // hookpace connects again, and shows the new certificate
	if code, _ := hp.Post(hp.Client(), target, []byte(`{"after":"rotation"}`), nil); code != http.StatusAccepted {
		t.Fatalf("POST: %d", code)
	}
	rc.WaitFor(t, 30*time.Second, "the webhook after the rotation", func(as []Arrival) bool { return len(as) >= 21 })
	mu.Lock()
	defer mu.Unlock()
	if serials["102"] != 1 {
		t.Errorf("after the rotation, certificates presented: %v; want serial 102 once", serials)
	}
}

// tokenServer is a partner's OAuth2 token endpoint issuing short-lived
// tokens, and the check its API makes of them.
type tokenServer struct {
	*httptest.Server
	life time.Duration

	mu      sync.Mutex
	issued  map[string]time.Time // token -> expiry
	revoked map[string]bool
	asked   int
	failing int // answer 503 to this many requests first
	secret  string
}

func newTokenServer(t *testing.T, secret string, life time.Duration) *tokenServer {
	ts := &tokenServer{life: life, issued: map[string]time.Time{}, revoked: map[string]bool{}, secret: secret}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		ts.asked++
		if ts.failing > 0 {
			ts.failing--
			http.Error(w, `{"error":"temporarily_unavailable"}`, http.StatusServiceUnavailable)
			return
		}
		id, pw, ok := r.BasicAuth()
		if !ok {
			r.ParseForm()
			id, pw = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		if id != "hookpace" || pw != ts.secret || r.PostFormValue("grant_type") != "client_credentials" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"invalid_client"}`))
			return
		}
		tok := fmt.Sprintf("tok-%d-%x", ts.asked, time.Now().UnixNano())
		ts.issued[tok] = time.Now().Add(ts.life)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": int(ts.life.Seconds())})
	}))
	t.Cleanup(ts.Close)
	return ts
}

// valid says whether r carries a token this endpoint issued that has not
// expired nor been revoked.
func (ts *tokenServer) valid(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	ts.mu.Lock()
	defer ts.mu.Unlock()
	exp, known := ts.issued[tok]
	return ok && known && time.Now().Before(exp) && !ts.revoked[tok]
}

func (ts *tokenServer) tokens() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []string
	for tok := range ts.issued {
		out = append(out, tok)
	}
	return out
}

// TestOAuth2Partner: a partner that accepts only bearer tokens
// from its token endpoint, which issues 2-second tokens. 50 webhooks
// queued behind a pause all arrive with valid tokens, over about two
// token lifetimes, and the endpoint is asked at most 10 times; a revoked
// token gets a 401, and the attempt fetches a new one and goes again at
// once; a token endpoint that fails holds the host as auth, without
// spending attempts, and delivery resumes when it answers. No secret nor
// token reaches the spool, the log, the admin API, the metrics or the
// dead-letter export; an API key header is set from its file over the
// app's own.
func TestOAuth2Partner(t *testing.T) {
	t.Parallel()
	const clientSecret, apiKey = "cs-Zq8v2L0pW9xT3k", "key-Hh41Uu7Rm2Yc"
	ts := newTokenServer(t, clientSecret, 2*time.Second)
	var revokeNext sync.Once
	rc := NewReceiver(t)
	rc.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		if r.Header.Get("X-Api-Key") != apiKey {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		if n == 10 { // revoke the token in use: the next request with it gets a 401
			revokeNext.Do(func() {
				tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
				ts.mu.Lock()
				ts.revoked[tok] = true
				ts.mu.Unlock()
			})
		}
		if !ts.valid(r) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	dir := t.TempDir()
	secretFile, keyFile := filepath.Join(dir, "client-secret"), filepath.Join(dir, "api-key")
	os.WriteFile(secretFile, []byte(clientSecret+"\n"), 0o600)
	os.WriteFile(keyFile, []byte(apiKey), 0o600)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.1"]}
hosts:
  "%s":
    rate: 20/s
    burst: 5
    concurrency: 1
    max_attempts: 2
    hold_schedule: [200ms]
    auth:
      oauth2: {token_url: "%s/token", client_id: hookpace, client_secret_file: %s, scopes: [webhooks]}
      headers: {X-Api-Key: {file: %s}}
`, rc.Host(), ts.URL, secretFile, keyFile))
	host := rc.Host()
	if out, err := hp.CLI("pause", host); err != nil {
		t.Fatalf("pause: %v %s", err, out)
	}
	for i := range 50 {
		hdr := http.Header{"X-Api-Key": {"the-app-s-own"}}
		if code, _ := hp.Post(hp.Client(), rc.URL+"/hook", fmt.Appendf(nil, `{"n":%d}`, i), hdr); code != http.StatusAccepted {
			t.Fatalf("POST: %d", code)
		}
	}
	if out, err := hp.CLI("resume", host); err != nil {
		t.Fatalf("resume: %v %s", err, out)
	}
	rc.WaitFor(t, 60*time.Second, "50 webhooks with valid tokens", func(as []Arrival) bool {
		ok := 0
		for _, a := range as {
			if a.Status == http.StatusOK {
				ok++
			}
		}
		return ok >= 50
	})
	ts.mu.Lock()
	asked := ts.asked
	ts.mu.Unlock()
	var unauthorized int
	for _, a := range rc.Arrivals() {
		if a.Status == http.StatusUnauthorized {
			unauthorized++
		}
	}
	if asked > 10 || unauthorized != 1 {
		t.Errorf("token endpoint asked %d times (at most 10), %d answers 401 (want the one revoked token's)", asked, unauthorized)
	}
	var dead struct {
		Total int `json:"total"`
	}
	hp.AdminJSON("/v1/dead", &dead)
	if dead.Total != 0 {
		t.Fatalf("%d dead letters", dead.Total)
	}

	// The token endpoint fails: the host is held as auth, and recovers.
	ts.mu.Lock()
	ts.failing = 3
	ts.issued = map[string]time.Time{} // every token so far is unknown: the next attempt needs a new one
	ts.mu.Unlock()
	before := rc.Count(nil)
	if code, _ := hp.Post(hp.Client(), rc.URL+"/hook", []byte(`{"while":"down"}`), nil); code != http.StatusAccepted {
		t.Fatalf("POST: %d", code)
	}
	Poll(t, 20*time.Second, "the host held as auth, then the webhook delivered", func() bool {
		return strings.Contains(hp.Log(), `hold=auth`) && rc.Count(func(a Arrival) bool { return a.Status == http.StatusOK }) >= 51
	})
	var hs struct {
		Auth struct {
			Kinds     string `json:"kinds"`
			Fetches   int    `json:"token_fetches"`
			LastError string `json:"last_error"`
		} `json:"auth"`
	}
	hp.AdminJSON("/v1/hosts/"+host, &hs)
	if hs.Auth.Kinds != "oauth2,headers" || hs.Auth.Fetches < 2 {
		t.Errorf("/v1/hosts auth = %+v", hs.Auth)
	}
	if !strings.Contains(hp.Log(), "503") {
		t.Errorf("the log does not say what the token endpoint answered")
	}
	t.Logf("%d webhooks, token endpoint asked %d times before the outage, %d arrivals in all (%d before it)", 51, asked, rc.Count(nil), before)

	// No secret in the spool, the log, the admin API, the metrics or an export.
	secrets := append([]string{clientSecret, apiKey}, ts.tokens()...)
	var places []string
	filepath.Walk(hp.Dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && p != filepath.Join(hp.Dir, "hookpace.yaml") {
			b, _ := os.ReadFile(p)
			for _, s := range secrets {
				if strings.Contains(string(b), s) {
					places = append(places, "file "+p)
				}
			}
		}
		return nil
	})
	export, _ := exec.Command(binary, "dead", "export", "--admin", hp.Admin).CombinedOutput()
	var page strings.Builder
	for _, p := range []string{"/v1/hosts", "/v1/hosts/" + host, "/v1/instance", "/"} {
		resp, err := http.Get("http://" + hp.Admin + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page.Write(b)
	}
	if !strings.Contains(page.String(), `data-col="auth">auth: oauth2, headers`) {
		t.Error("the status page does not show the host's credentials")
	}
	for name, text := range map[string]string{"log": hp.Log(), "metrics": hp.Metrics(), "export": string(export), "admin": page.String()} {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				places = append(places, name)
			}
		}
	}
	if len(places) > 0 {
		t.Errorf("a secret or token leaked to: %v", places)
	}
}

package e2e

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
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
	"testing"
	"time"

	"golang.org/x/net/websocket"
)

// internalPKI is the app's own CA, a server certificate for every name
// and address of TestCaptureTransparent, and the app's client
// certificate, written under dir.
type internalPKI struct {
	caFile, certFile, keyFile string
	server                    tls.Certificate
	pool                      *x509.CertPool
}

func newInternalPKI(t *testing.T, dir string, names []string, ips []net.IP) internalPKI {
	t.Helper()
	now := time.Now()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "corp internal CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage) (tls.Certificate, []byte, []byte) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.DNSNames, tmpl.IPAddresses = names, ips
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, _ := x509.MarshalECPrivateKey(key)
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
			pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	}
	p := internalPKI{caFile: filepath.Join(dir, "corp-ca.pem"), certFile: filepath.Join(dir, "app.pem"), keyFile: filepath.Join(dir, "app-key.pem")}
	p.server, _, _ = issue(2, names[0], x509.ExtKeyUsageServerAuth)
	_, cert, key := issue(3, "billing-app", x509.ExtKeyUsageClientAuth)
	for f, b := range map[string][]byte{p.caFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), p.certFile: cert, p.keyFile: key} {
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p.pool = x509.NewCertPool()
	p.pool.AddCert(ca)
	return p
}

// serveIn serves h on addr inside ns, over TLS with cfg when it is set.
func serveIn(t *testing.T, ns *netns, addr string, cfg *tls.Config, h http.Handler) {
	t.Helper()
	ln := ns.listen(t, addr)
	srv := &http.Server{Handler: h, TLSConfig: cfg}
	if cfg != nil {
		if len(cfg.NextProtos) == 1 && cfg.NextProtos[0] == "h2" {
			srv.Protocols = new(http.Protocols)
			srv.Protocols.SetHTTP2(true)
		}
		go srv.ServeTLS(ln, "", "")
	} else {
		go srv.Serve(ln)
	}
	t.Cleanup(func() { srv.Close() })
}

// transparentWorld is the network namespace of the transparency tests
// and what runs in it: the names of the calls in its /etc/hosts, the
// servers the app calls, the partners of its webhooks and the app.
type transparentWorld struct {
	ns       *netns
	pub      string // readable by uid 65534: the PKI's files, the app, the trust file
	pki      internalPKI
	partners []*Receiver
	app      string
}

// newTransparentWorld makes the namespace with the servers of the app's
// 13 calls, the partners (unlisted but for the one on 203.0.113.10:8443)
// and the app, built.
func newTransparentWorld(t *testing.T) *transparentWorld {
	t.Helper()
	ns := newNetns(t, "partner4.hooks.test")
	if out, err := exec6(ns); err != nil {
		t.Fatalf("an IPv6 partner address in %s: %v\n%s", ns.name, err, out)
	}
	for _, a := range []string{"10.1.2.3/32", "203.0.113.20/32", "203.0.113.21/32", "203.0.113.22/32", "203.0.113.23/32"} {
		if out, err := ns.exec("ip", "addr", "add", a, "dev", "lo").CombinedOutput(); err != nil {
			t.Fatalf("ip addr add %s: %v\n%s", a, err, out)
		}
	}
	f, err := os.OpenFile(filepath.Join("/etc/netns", ns.name, "hosts"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, "10.1.2.3 billing.corp.test\n203.0.113.20 mtls.hooks.test\n203.0.113.21 h2.hooks.test\n203.0.113.22 stream.hooks.test\n203.0.113.23 raw.hooks.test\n2001:db8::10 partner6.hooks.test\n")
	f.Close()

	pub := publicDir(t)
	pki := newInternalPKI(t, pub, []string{"billing.corp.test", "mtls.hooks.test", "h2.hooks.test", "stream.hooks.test", "partner4.hooks.test", "partner6.hooks.test"},
		[]net.IP{net.ParseIP("10.1.2.3"), net.ParseIP("203.0.113.10"), net.ParseIP("2001:db8::10")})
	serverTLS := func(mod func(*tls.Config)) *tls.Config {
		c := &tls.Config{Certificates: []tls.Certificate{pki.server}}
		if mod != nil {
			mod(c)
		}
		return c
	}
	// The internal API, on 10.1.2.3.
	billing := http.NewServeMux()
	billing.HandleFunc("GET /get", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "billing %s", r.Host) })
	billing.HandleFunc("POST /charge", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusPaymentRequired)
		fmt.Fprintf(w, "declined %s", b)
	})
	serveIn(t, ns, "10.1.2.3:80", nil, billing)
	serveIn(t, ns, "10.1.2.3:443", serverTLS(nil), billing)
	// An mTLS API on a documentation address: it wants the app's certificate.
	serveIn(t, ns, "203.0.113.20:443", serverTLS(func(c *tls.Config) { c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, pki.pool }),
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "hello %s", r.TLS.PeerCertificates[0].Subject.CommonName)
		}))
	// An h2-only API with gRPC-style trailers.
	serveIn(t, ns, "203.0.113.21:443", serverTLS(func(c *tls.Config) { c.NextProtos = []string{"h2"} }),
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/grpc" {
				fmt.Fprintf(w, "h2 only: %s", r.Proto)
				return
			}
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
			w.Write([]byte{0, 0, 0, 0, 2, 8, 7})
			w.Header().Set("Grpc-Status", "0")
			w.Header().Set("Grpc-Message", "ok")
		}))
	// A streaming API: WebSocket, SSE, big bodies.
	stream := http.NewServeMux()
	stream.Handle("/ws", websocket.Handler(func(ws *websocket.Conn) { io.Copy(ws, ws) }))
	stream.HandleFunc("/sse", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: hello\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-time.After(3 * time.Second):
		case <-r.Context().Done():
		}
		fmt.Fprint(w, "data: bye\n\n")
	})
	stream.HandleFunc("/down", func(w http.ResponseWriter, _ *http.Request) {
		b := make([]byte, 1<<20)
		for i := range b {
			b[i] = byte(i * 13)
		}
		for range 50 {
			w.Write(b)
		}
	})
	stream.HandleFunc("/up", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		fmt.Fprintf(w, "%d bytes sha256 %x err %v", n, h.Sum(nil), err)
	})
	serveIn(t, ns, "203.0.113.22:443", serverTLS(nil), stream)
	// Raw TCP on port 80: a line protocol.
	raw := ns.listen(t, "203.0.113.23:80")
	t.Cleanup(func() { raw.Close() })
	go func() {
		for {
			c, err := raw.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				fmt.Fprintf(c, "RAW:%s", line)
			}()
		}
	}()
	// A server that speaks first, on 443: a greeting, then one answer.
	banner := ns.listen(t, "203.0.113.23:443")
	t.Cleanup(func() { banner.Close() })
	go func() {
		for {
			c, err := banner.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				fmt.Fprintf(c, "220 raw.hooks.test ready\n")
				line, _ := bufio.NewReader(c).ReadString('\n')
				fmt.Fprintf(c, "250 %s", line)
			}()
		}
	}()
	// The partners of the webhooks, unlisted in the config.
	base := &Receiver{Server: &httptest.Server{TLS: serverTLS(nil)}}
	partners := []*Receiver{
		nsReceiver(t, ns, "203.0.113.10:443", base), nsReceiver(t, ns, "203.0.113.10:80", nil),
		nsReceiver(t, ns, "[2001:db8::10]:443", base), nsReceiver(t, ns, "[2001:db8::10]:80", nil),
		nsReceiver(t, ns, "203.0.113.10:8443", base), // named in hosts: captured by capture rules --config
	}
	// The app, readable by uid 65534.
	app := filepath.Join(pub, "transparentapp")
	if out, err := exec.Command("go", "build", "-o", app, "./testdata/transparentapp").CombinedOutput(); err != nil {
		t.Fatalf("build the app: %v\n%s", err, out)
	}
	return &transparentWorld{ns: ns, pub: pub, pki: pki, partners: partners, app: app}
}

// start starts hookpace in w's namespace with head (its listeners) and
// the transparency tests' config: the open-world CA (defaults.connect:
// mitm, only partner4.hooks.test:8443 in hosts), egress open to the two
// documentation ranges. trust is the app's SSL_CERT_FILE: hookpace's
// bundle and the internal CA.
func (w *transparentWorld) start(t *testing.T, head string) (hp *Hookpace, trust string) {
	t.Helper()
	hp = startInNetns(t, w.ns, head+fmt.Sprintf(`
defaults: {connect: mitm, rate: 20/s, burst: 5}
webhooks: [{header: webhook-signature}]
egress: {allow: ["203.0.113.0/24", "2001:db8::/32"]}
tls: {ca_file: %s}
mitm: {public_dir: %s}
hosts:
  "partner4.hooks.test:8443": {rate: 20/s}
`, w.pki.caFile, filepath.Join(w.pub, "trust")))
	bundle := hookpaceCA(t, hp, "bundle")
	trust = filepath.Join(w.pub, "app-trust.pem")
	b1, _ := os.ReadFile(bundle)
	b2, _ := os.ReadFile(w.pki.caFile)
	if err := os.WriteFile(trust, append(b1, b2...), 0o644); err != nil {
		t.Fatal(err)
	}
	return hp, trust
}

// direct is what the app prints run directly: as uid 0, with no proxy
// variable, trusting trust. It fails the test unless all 13 calls worked.
func (w *transparentWorld) direct(t *testing.T, trust string) string {
	t.Helper()
	direct := w.ns.exec(w.app, w.pki.certFile, w.pki.keyFile)
	direct.Env = appEnv("SSL_CERT_FILE=" + trust)
	want, err := direct.CombinedOutput()
	if err != nil {
		t.Fatalf("the app run directly: %v\n%s", err, want)
	}
	if strings.Contains(string(want), "FAIL") || strings.Count(string(want), "\n") != 13 {
		t.Fatalf("the app run directly did not make its 13 calls:\n%s", want)
	}
	return string(want)
}

// sameAsDirect reports each line of want (the direct run's) that got
// (the run via hookpace, as how says) lacks, and counts those it has.
func sameAsDirect(t *testing.T, want, got, how string) (same int) {
	t.Helper()
	for line := range strings.Lines(want) {
		if strings.Contains(got, line) {
			same++
		} else {
			name, _, _ := strings.Cut(line, " ")
			t.Errorf("%s, %s differs:\n direct:   %s %-9s %s", how, name, line, how+":", grepLines(got, name+" "))
		}
	}
	return same
}

// webhooksOnce checks the app's "webhook URL status id" lines in got:
// each a 202 with an id, 7 distinct ids, each arriving once at w's
// partners with it.
func (w *transparentWorld) webhooksOnce(t *testing.T, got string) {
	t.Helper()
	ids := map[string]bool{}
	for line := range strings.Lines(got) {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "webhook" {
			continue
		}
		if len(f) != 4 || f[2] != "202" || f[3] == "" {
			t.Errorf("a signed webhook got %q, want 202 and an id", strings.TrimSpace(line))
			continue
		}
		ids[f[3]] = true
	}
	if len(ids) != 7 {
		t.Fatalf("%d webhooks accepted with distinct ids, want 7:\n%s", len(ids), got)
	}
	all := func() (as []Arrival) {
		for _, p := range w.partners {
			as = append(as, p.Arrivals()...)
		}
		return as
	}
	Poll(t, 60*time.Second, "7 webhooks at the partners", func() bool { return len(all()) >= 7 })
	seen := map[string]int{}
	for _, a := range all() {
		seen[a.Header.Get("X-Hookpace-Id")]++
	}
	for id := range ids {
		if seen[id] != 1 {
			t.Errorf("webhook %s arrived %d times, want once", id, seen[id])
		}
	}
}

// tunnelSeries is hp's hookpace_tunnels_total series, and the output of
// hookpace status, which lists each splice with its reason.
func (w *transparentWorld) tunnelSeries(t *testing.T, hp *Hookpace) (series, status string) {
	t.Helper()
	resp, err := w.ns.client().Get("http://" + hp.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	out, err := w.ns.exec(binary, "status", "--admin", hp.Admin).CombinedOutput()
	if err != nil {
		t.Fatalf("hookpace status: %v\n%s", err, out)
	}
	return grepLines(string(m), "hookpace_tunnels_total{"), string(out)
}

// TestCaptureTransparent: in a network namespace of its own, with the
// product's capture rules (hookpace's uid 0 exempt) and the open-world CA
// (defaults.connect: mitm, no hosts), egress open to the two
// documentation ranges only, a Go app as uid 65534 with no proxy variable
// makes 13 calls that are not webhooks: an internal API on 10.1.2.3 over
// http (GET, POST) and https (its own certificate), an mTLS API, an
// h2-only API and a gRPC-style call with trailers, a WebSocket echo, a
// server-sent event stream, 50 MiB down, 20 MiB up, raw TCP on port 80,
// a PUT with Expect: 100-continue, and a protocol where the server speaks
// first on port 443 (spliced when it speaks). It prints exactly what the
// same app prints run directly (as uid 0, whom the rules exempt). Its 6 signed webhooks to unlisted partners on
// 203.0.113.10 and 2001:db8::10 get 202 with an id and arrive once with
// it (the app speaks h2 to hookpace, as to the partners), and so does one
// to a partner named in hosts on port 8443 (the rules
// are applied with --config). With --reject-quic, UDP to port 443 is
// refused to the app and not to hookpace's uid.
func TestCaptureTransparent(t *testing.T) {
	t.Parallel()
	w := newTransparentWorld(t)
	ns, pki, pub, app := w.ns, w.pki, w.pub, w.app
	// A UDP (QUIC) echo on 203.0.113.22:443.
	var udp net.PacketConn
	if err := ns.do(func() (err error) { udp, err = net.ListenPacket("udp", "203.0.113.22:443"); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { udp.Close() })
	go func() {
		b := make([]byte, 64)
		for {
			n, from, err := udp.ReadFrom(b)
			if err != nil {
				return
			}
			udp.WriteTo(append([]byte("echo:"), b[:n]...), from)
		}
	}()

	hp, trust := w.start(t, `capture: {listen: "127.0.0.1:15001"}`)

	// Directly: as uid 0, before the rules, the app's calls as they are.
	want := w.direct(t, trust)
	if out, err := ns.exec(binary, "capture", "rules", "--to", "15001", "--exclude-uid", "0", "--config", hp.Config, "--reject-quic", "--apply").CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "ports 80,443,8443") {
		t.Fatalf("hookpace capture rules --config --reject-quic --apply: %v\n%s", err, out)
	}
	// UDP 443 is refused to the app (HTTP/3 falls back to TCP), not to uid 0.
	quic := ns.asNobody(app, pki.certFile, pki.keyFile, "quic")
	quic.Env = appEnv("HOME=" + pub)
	// (A locally sent datagram that OUTPUT rejects fails its send: EPERM.)
	if out, _ := quic.CombinedOutput(); !strings.Contains(string(out), "udp-443 FAIL") {
		t.Errorf("UDP 443 as the app with --reject-quic: %s, want refused", out)
	}
	if out, _ := ns.exec(app, pki.certFile, pki.keyFile, "quic").CombinedOutput(); !strings.Contains(string(out), "udp-443 echo:quic?") {
		t.Errorf("UDP 443 as hookpace's uid: %s, want the echo", out)
	}
	captured := ns.asNobody(app, pki.certFile, pki.keyFile, "webhooks")
	captured.Env = appEnv("HOME="+pub, "SSL_CERT_FILE="+trust)
	out, err := captured.CombinedOutput()
	if err != nil {
		t.Fatalf("the app captured: %v\n%s", err, out)
	}
	got := string(out)
	same := sameAsDirect(t, want, got, "captured")
	for _, must := range []string{"first-event-within-1s=true", "upload-20MiB HTTP/2.0 200", `grpc-status="0"`, `"hello billing-app" via corp internal CA`, "internal-https 200 HTTP/2.0 \"billing billing.corp.test\" via corp internal CA"} {
		if !strings.Contains(got, must) {
			t.Errorf("captured output lacks %q:\n%s", must, got)
		}
	}
	t.Logf("%d of 13 non-webhook calls as direct", same)

	w.webhooksOnce(t, got)
	tl, status := w.tunnelSeries(t, hp)
	for _, want := range []string{`reason="internal"`, `reason="client-certificate"`, `reason="alpn"`, `reason="not-http"`,
		`host="stream.hooks.test",mode="intercepted"`, `host="partner4.hooks.test",mode="intercepted"`, `host="partner6.hooks.test",mode="intercepted"`} {
		if !strings.Contains(tl, want) {
			t.Errorf("hookpace_tunnels_total has no %s series:\n%s", want, tl)
		}
	}
	// hookpace status lists each splice with its reason.
	for _, want := range []string{"mtls.hooks.test", "asks for a client certificate", "h2.hooks.test", "not HTTP/1.1", "10.1.2.3:443", "is private", "203.0.113.23:80", "neither TLS nor HTTP/1.1", "203.0.113.23:443", "the server spoke first"} {
		if !strings.Contains(status, want) {
			t.Errorf("hookpace status lacks %q:\n%s", want, status)
		}
	}
	if strings.Contains(hp.Log(), "capture: loop") {
		t.Errorf("a loop was reported:\n%s", grepLines(hp.Log(), "loop"))
	}
}

package e2e

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// appHit is one request an app behind an inbound route served.
type appHit struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// goApp is an app in Go's net/http with a prefix route for its webhooks
// (/webhooks/stripe/ serves everything below), as apps mount them; every
// request that reaches the server is recorded, before the mux routes it.
type goApp struct {
	*httptest.Server
	mu   sync.Mutex
	hits []appHit
}

func newGoApp(t *testing.T) *goApp {
	a := &goApp{}
	mux := http.NewServeMux()
	hook := func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }
	mux.HandleFunc("/webhooks/stripe", hook)
	mux.HandleFunc("/webhooks/stripe/", hook)
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "app ok") })
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.hits = append(a.hits, appHit{r.Method, r.URL.RequestURI(), r.Header.Clone(), body})
		a.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *goApp) all() []appHit {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]appHit(nil), a.hits...)
}

// pyApp is Python's http.server (/usr/bin/python3) answering every
// method, lower-case post too, and printing one line per request:
// method, path, and the X-Hookpace-Id it came with ("-": none).
type pyApp struct {
	URL  string
	mu   sync.Mutex
	hits []string
}

const pyAppScript = `
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class H(BaseHTTPRequestHandler):
    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        print(self.command, self.path, self.headers.get("X-Hookpace-Id") or "-", flush=True)
        body = b"app ok" if self.path == "/health" else b""
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_post = do_HEAD = handle_any
    def log_message(self, *a):
        pass
s = HTTPServer(("127.0.0.1", 0), H)
print("listening", s.server_address[1], flush=True)
s.serve_forever()
`

func startPyApp(t *testing.T) *pyApp {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("the Python app needs %s: %v", python, err)
	}
	script := filepath.Join(t.TempDir(), "app.py")
	if err := os.WriteFile(script, []byte(pyAppScript), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, script)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatalf("the Python app did not start: %v", sc.Err())
	}
	port, ok := strings.CutPrefix(sc.Text(), "listening ")
	if !ok {
		t.Fatalf("the Python app said %q", sc.Text())
	}
	a := &pyApp{URL: "http://127.0.0.1:" + port}
	go func() {
		for sc.Scan() {
			a.mu.Lock()
			a.hits = append(a.hits, sc.Text())
			a.mu.Unlock()
		}
	}()
	return a
}

func (a *pyApp) all() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.hits...)
}

// doorRequest writes one request byte for byte to addr (the target as
// given, not cleaned by a client) and returns the answer's status.
func doorRequest(t *testing.T, addr, method, target string, header http.Header, body []byte) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Length: %d\r\n", method, target, addr, len(body))
	header.Write(&b)
	b.WriteString("\r\n")
	b.Write(body)
	if _, err := c.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func stripeSig(secret string, at time.Time, body []byte) string {
	ts := strconv.FormatInt(at.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// forgedVariants are the requests that reached an app unverified when a
// route checked only a POST to its exact raw path: 9 paths, 4 methods.
var forgedVariants = []struct{ method, target string }{
	{"POST", "/webhooks/stripe/"}, {"POST", "/webhooks/stripe;x"}, {"POST", "//webhooks/stripe"},
	{"POST", "/webhooks//stripe"}, {"POST", "/Webhooks/stripe"}, {"POST", "/webhooks/./stripe"},
	{"POST", "/x/../webhooks/stripe"}, {"POST", "/webhooks/stripe%2F"}, {"POST", "/webhooks/stripe/x"},
	{"PUT", "/webhooks/stripe"}, {"PATCH", "/webhooks/stripe"}, {"DELETE", "/webhooks/stripe"}, {"post", "/webhooks/stripe"},
}

// An inbound route paths: ["/webhooks/stripe"], verify: {scheme: stripe}
// in front of a Go app with a prefix route and of Python's http.server:
// the 13 forged requests reach neither app; GET /health reaches both;
// validly signed webhooks, on the exact path and on a variant, arrive
// through the spool with hookpace's id.
func TestInboundForgedVariantsNeverReachApp(t *testing.T) {
	t.Parallel()
	const secret = "whsec_stripe_e2e_variants"
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "stripe")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	goA, pyA := newGoApp(t), startPyApp(t)
	route := func(name, to string) string {
		return fmt.Sprintf(`  - name: %s
    listen: 127.0.0.1:0
    to: %s
    paths: ["/webhooks/stripe"]
    verify: {scheme: stripe, secret_file: %s}
    dedupe: {json: id}
`, name, to, secretFile)
	}
	hp := Start(t, "inbound:\n"+route("go", goA.URL)+route("py", pyA.URL))
	addrs := inboundAddrs(t, hp)
	for _, name := range []string{"go", "py"} {
		addr := addrs[name]
		if addr == "" {
			t.Fatalf("no inbound listening line for %s\n%s", name, hp.Log())
		}
		for i, f := range forgedVariants {
			body := fmt.Appendf(nil, `{"id":"evt_forged_%s_%d","type":"charge.succeeded"}`, name, i)
			h := http.Header{"Stripe-Signature": {stripeSig("whsec_not_the_secret", time.Now(), body)}, "Content-Type": {"application/json"}}
			if st := doorRequest(t, addr, f.method, f.target, h, body); st/100 == 2 {
				t.Errorf("%s: forged %s %s answered %d", name, f.method, f.target, st)
			}
		}
		if st := doorRequest(t, addr, "GET", "/health", http.Header{}, nil); st != 200 {
			t.Errorf("%s: GET /health: %d", name, st)
		}
		for i, target := range []string{"/webhooks/stripe", "/webhooks/stripe/"} {
			body := fmt.Appendf(nil, `{"id":"evt_good_%s_%d","type":"charge.succeeded"}`, name, i)
			h := http.Header{"Stripe-Signature": {stripeSig(secret, time.Now(), body)}, "Content-Type": {"application/json"}}
			if st := doorRequest(t, addr, "POST", target, h, body); st != http.StatusAccepted {
				t.Errorf("%s: signed POST %s: %d, want 202", name, target, st)
			}
		}
	}

	// The Go app: GET /health and the two signed webhooks, nothing else.
	Poll(t, 20*time.Second, "the Go app gets both signed webhooks", func() bool {
		n := 0
		for _, h := range goA.all() {
			if h.Method == "POST" && h.Header.Get("X-Hookpace-Id") != "" {
				n++
			}
		}
		return n == 2
	})
	Poll(t, 20*time.Second, "the Python app gets both signed webhooks", func() bool {
		n := 0
		for _, h := range pyA.all() {
			if strings.HasPrefix(h, "POST ") && !strings.HasSuffix(h, " -") {
				n++
			}
		}
		return n == 2
	})
	forged := 0
	var seen []string
	for _, h := range goA.all() {
		seen = append(seen, h.Method+" "+h.Path)
		switch {
		case h.Method == "GET" && h.Path == "/health":
		case h.Method == "POST" && h.Path == "/webhooks/stripe" && h.Header.Get("X-Hookpace-Id") != "" && bytes.Contains(h.Body, []byte("evt_good_go")):
		default:
			forged++
		}
	}
	for _, h := range pyA.all() {
		seen = append(seen, "py: "+h)
		f := strings.Fields(h)
		switch {
		case len(f) == 3 && f[0] == "GET" && f[1] == "/health":
		case len(f) == 3 && f[0] == "POST" && f[1] == "/webhooks/stripe" && f[2] != "-":
		default:
			forged++
		}
	}
	t.Logf("the apps got: %s", strings.Join(seen, "; "))
	if forged != 0 {
		t.Errorf("%d forged requests reached an app (of %d sent)", forged, 2*len(forgedVariants))
	}
	if len(seen) != 6 {
		t.Errorf("the apps got %d requests, want 6 (GET /health and 2 webhooks each)", len(seen))
	}
}

// A forged webhook that any client of the proxy listener posts to an
// inbound route's app, by any spelling of its address (egress allows
// loopback here, so only the door's own refusal stands in the way), is
// refused and takes no delivery id from the route; a client's forged door
// mark reaches no one and signs nothing; two routes to one app sign with
// their own secrets, a third signs nothing, and check-config passes.
func TestInboundSignatureIsTheDoors(t *testing.T) {
	t.Parallel()
	const stripeSecret = "whsec_stripe_e2e_doors"
	secrets := map[string]string{
		"a": "whsec_YWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYQ==",
		"b": "whsec_YmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYg==",
	}
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stripeFile := write("stripe", stripeSecret)
	app, partner := NewReceiver(t), NewReceiver(t)
	cfg := fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8", "::ffff:127.0.0.0/104"]}
inbound:
  - name: a
    listen: 127.0.0.1:0
    to: %[1]s
    paths: ["/webhooks/stripe"]
    verify: {scheme: stripe, secret_file: %[2]s}
    dedupe: {json: id}
    sign: {scheme: standard-webhooks, secret_file: %[3]s}
  - name: b
    listen: 127.0.0.1:0
    to: %[1]s
    paths: ["/webhooks/b"]
    verify: {scheme: stripe, secret_file: %[2]s}
    sign: {scheme: standard-webhooks, secret_file: %[4]s}
  - name: c
    listen: 127.0.0.1:0
    to: %[1]s
    paths: ["/webhooks/c"]
    verify: {scheme: stripe, secret_file: %[2]s}
`, app.URL, stripeFile, write("a", secrets["a"]), write("b", secrets["b"]))
	cfgFile := write("check.yaml", "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nspool: {dir: "+filepath.Join(dir, "spool")+"}\n"+cfg)
	if out, err := exec.Command(binary, "check-config", cfgFile).CombinedOutput(); err != nil {
		t.Fatalf("check-config: %v\n%s", err, out)
	}
	hp := Start(t, cfg)
	addrs := inboundAddrs(t, hp)

	// Through the proxy listener, to the app's own URL and its other
	// spellings, with the provider's delivery id as the key.
	forged := []byte(`{"id":"evt_preclaim_1","type":"charge.succeeded","forged":true}`)
	pc := hp.Client()
	u, _ := url.Parse(app.URL)
	for _, target := range []string{app.URL, "http://localhost:" + u.Port(), "http://[::ffff:127.0.0.1]:" + u.Port(),
		"http://127.0.0.2:" + u.Port(), "http://app.localhost:" + u.Port()} {
		req, _ := http.NewRequest("POST", target+"/webhooks/stripe", bytes.NewReader(forged))
		req.Header.Set("Idempotency-Key", "evt_preclaim_1")
		req.Header.Set("Stripe-Signature", stripeSig("whsec_forger", time.Now(), forged))
		resp, err := pc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("proxy POST %s: %d %s", target, resp.StatusCode, bytes.TrimSpace(b))
		if resp.StatusCode/100 == 2 {
			t.Errorf("proxy POST %s: %d, want a refusal", target, resp.StatusCode)
		}
	}

	// A route's own listener is hookpace itself: never a destination.
	req, _ := http.NewRequest("POST", "http://"+addrs["a"]+"/webhooks/stripe", bytes.NewReader(forged))
	if resp, err := pc.Do(req); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !bytes.Contains(b, []byte("self")) {
			t.Errorf("proxy POST to route a's own listener: %d %s, want 403 (self)", resp.StatusCode, b)
		}
	}

	// A client's forged door mark, on a webhook to a partner.
	req, _ = http.NewRequest("POST", partner.URL+"/hooks", bytes.NewReader([]byte(`{"id":"evt_marked"}`)))
	req.Header.Set("Hookpace-Inbound-Route", "a")
	if resp, err := pc.Do(req); err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("a webhook to a partner: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	partner.WaitFor(t, 20*time.Second, "the partner's webhook", func(as []Arrival) bool { return len(as) == 1 })
	if h := partner.Arrivals()[0].Header; h.Get("Hookpace-Inbound-Route") != "" || h.Get("Hookpace-Webhook-Signature") != "" {
		t.Errorf("a client's door mark was kept or signed for: %v", h)
	}

	// The real event, then one through each route's door.
	post := func(route, path string, body []byte) {
		h := http.Header{"Stripe-Signature": {stripeSig(stripeSecret, time.Now(), body)}, "Content-Type": {"application/json"}}
		if st := doorRequest(t, addrs[route], "POST", path, h, body); st != http.StatusAccepted {
			t.Errorf("route %s: signed POST %s: %d, want 202", route, path, st)
		}
	}
	post("a", "/webhooks/stripe", []byte(`{"id":"evt_preclaim_1","type":"charge.succeeded"}`))
	post("b", "/webhooks/b", []byte(`{"id":"evt_b","type":"charge.succeeded"}`))
	post("c", "/webhooks/c", []byte(`{"id":"evt_c","type":"charge.succeeded"}`))
	app.WaitFor(t, 20*time.Second, "three webhooks at the app", func(as []Arrival) bool { return len(as) >= 3 })

	verifier := func(name string) *standardwebhooks.Webhook {
		wh, err := standardwebhooks.NewWebhook(secrets[name])
		if err != nil {
			t.Fatal(err)
		}
		return wh
	}
	verifies := func(wh *standardwebhooks.Webhook, a Arrival) bool {
		return wh.Verify(a.Body, http.Header{"Webhook-Id": {a.Header.Get("Hookpace-Webhook-Id")},
			"Webhook-Timestamp": {a.Header.Get("Hookpace-Webhook-Timestamp")},
			"Webhook-Signature": {a.Header.Get("Hookpace-Webhook-Signature")}}) == nil
	}
	wa, wb := verifier("a"), verifier("b")
	for _, a := range app.Arrivals() {
		if bytes.Contains(a.Body, []byte("forged")) {
			t.Errorf("the forged webhook reached the app: %s %s %v", a.Method, a.Path, a.Header)
		}
		if a.Header.Get("Hookpace-Inbound-Route") != "" {
			t.Errorf("hookpace's door mark reached the app: %v", a.Header)
		}
		switch {
		case bytes.Contains(a.Body, []byte("evt_preclaim_1")):
			if !verifies(wa, a) || verifies(wb, a) {
				t.Errorf("route a's webhook: signed by a %v, by b %v; want a's alone", verifies(wa, a), verifies(wb, a))
			}
		case bytes.Contains(a.Body, []byte("evt_b")):
			if !verifies(wb, a) || verifies(wa, a) {
				t.Errorf("route b's webhook: signed by b %v, by a %v; want b's alone", verifies(wb, a), verifies(wa, a))
			}
		case bytes.Contains(a.Body, []byte("evt_c")):
			if a.Header.Get("Hookpace-Webhook-Signature") != "" {
				t.Errorf("route c (no sign) delivered with a signature: %v", a.Header)
			}
		default:
			t.Errorf("unexpected arrival %s %s: %s", a.Method, a.Path, a.Body)
		}
	}
	if n := len(app.Arrivals()); n != 3 {
		t.Errorf("the app got %d requests, want 3", n)
	}
}

// The inbound door refuses a declared body over spool.max_body with 413
// before reading it, and cuts a body that trickles at proxy.body_timeout
// with 408.
func TestInboundDoorStrictBody(t *testing.T) {
	t.Parallel()
	app := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
proxy: {body_timeout: 1s}
spool: {max_body: 1MiB}
inbound:
  - name: d
    listen: 127.0.0.1:0
    to: %s
    paths: ["/webhooks"]
`, app.URL))
	addr := inboundAddrs(t, hp)["d"]
	answer := func(head string, body []byte) (int, time.Duration) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(60 * time.Second))
		start := time.Now()
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		c.Write(body)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}
	st, took := answer("POST /webhooks HTTP/1.1\r\nHost: d\r\nContent-Length: 104857600\r\n\r\n", nil)
	t.Logf("declared 100 MiB: %d in %v", st, took)
	if st != http.StatusRequestEntityTooLarge {
		t.Errorf("declared 100 MiB, nothing sent: %d, want 413 at once", st)
	}
	st, took = answer("POST /webhooks HTTP/1.1\r\nHost: d\r\nContent-Length: 100\r\n\r\n", []byte(`{"partial":`))
	t.Logf("a body that stops: %d in %v", st, took)
	if st != http.StatusRequestTimeout {
		t.Errorf("a body that stops after 11 of 100 bytes: %d after %v, want 408", st, took)
	}
	if len(app.Arrivals()) != 0 {
		t.Errorf("the app got %d requests, want none", len(app.Arrivals()))
	}
}

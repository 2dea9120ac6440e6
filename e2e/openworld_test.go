package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// openWorldSink is one TLS partner for every name: /v1/charges answers
// 402 with its own body (an API), /stream streams three chunks, GET /get
// answers a body, anything else 200.
func openWorldSink(t *testing.T, names ...string) (*Receiver, string, string) {
	t.Helper()
	sink, caFile := tlsPartner(t, names...)
	sink.Handle = func(w http.ResponseWriter, r *http.Request, _ int) {
		switch r.URL.Path {
		case "/v1/charges":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Sink", "charges")
			w.WriteHeader(http.StatusPaymentRequired)
			fmt.Fprint(w, `{"error":"card_declined"}`)
		case "/stream":
			w.Header().Set("Content-Type", "text/plain")
			for i := range 3 {
				fmt.Fprintf(w, "chunk%d;", i)
				if err := http.NewResponseController(w).Flush(); err != nil {
					panic(err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		case "/get":
			fmt.Fprint(w, "hello from "+r.Host)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}
	return sink, caFile, sink.URL[strings.LastIndex(sink.URL, ":")+1:]
}

// Unwrap lets http.ResponseController reach the connection's own writer
// (to flush a streamed answer) through the receiver's status recorder.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// reloadWith rewrites hp's config as cfg and waits for hookpace to apply
// it (the n-th "config reloaded" line).
func reloadWith(t *testing.T, hp *Hookpace, cfg string, n int) {
	t.Helper()
	writeConfig(t, hp.Config, "127.0.0.1:0", "127.0.0.1:0", filepath.Join(hp.Dir, "spool"), cfg)
	hp.Signal(syscall.SIGHUP)
	Poll(t, 30*time.Second, "the reload", func() bool { return strings.Count(hp.Log(), "config reloaded") >= n })
}

// TestOpenWorldAcceptance: with defaults.connect: mitm and no operator CA,
// hookpace's own CA vouches for any partner name without naming it: 40
// signed webhooks to 40 names none of them under hosts are spooled (202
// and an id) and each arrives once with X-Hookpace-Id; an unsigned POST to
// an API gets the API's own 402 and body; a GET and a streamed answer pass
// intact; the CA's bytes are the same before, during and after a reload
// that adds a host; its constraints exclude every IP and cluster.local,
// and a CONNECT to an IP gets the partner's own certificate, never a leaf
// of hookpace's.
func TestOpenWorldAcceptance(t *testing.T) {
	t.Parallel()
	names := []string{"api.partner.test", "new.partner.test"}
	for i := 1; i <= 40; i++ {
		names = append(names, fmt.Sprintf("p%d.partner.test", i))
	}
	sink, sinkCA, port := openWorldSink(t, names...)
	cfg := fmt.Sprintf(`
defaults: {connect: mitm, rate: 50/s, burst: 10}
webhooks: [{header: webhook-signature}]
egress: {allow: ["127.0.0.1"]}
tls: {ca_file: %s}
`, sinkCA)
	hp := StartResolving(t, cfg, names...)
	caPath := hookpaceCA(t, hp, "cert")
	bundle := hookpaceCA(t, hp, "bundle")
	caBefore, err := os.ReadFile(caPath)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("openssl", "x509", "-noout", "-text", "-in", caPath).CombinedOutput()
	if err != nil {
		t.Fatalf("openssl x509: %v\n%s", err, out)
	}
	for _, s := range []string{"X509v3 Name Constraints: critical", "Excluded:", "DNS:cluster.local", "DNS:svc", "IP:0.0.0.0/0.0.0.0"} {
		if !strings.Contains(string(out), s) {
			t.Fatalf("openssl x509 -text lacks %q:\n%s", s, out)
		}
	}

	py := exec.Command(debianPython, "-c", `
import sys, requests
port = sys.argv[1]
s = requests.Session()
for i in range(1, 41):
    r = s.post("https://p%d.partner.test:%s/hooks/%d" % (i, port, i), json={"n": i}, headers={"webhook-signature": "v1,c2lnbmVk", "webhook-id": "msg_%d" % i})
    print("hook", r.status_code, r.headers.get("X-Hookpace-Id"))
`, port)
	py.Env = appEnv("HTTPS_PROXY=http://"+hp.Proxy, "REQUESTS_CA_BUNDLE="+bundle)
	out, err = py.CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	ids := map[string]bool{}
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		f := strings.Fields(line)
		if len(f) != 3 || f[1] != "202" || f[2] == "None" {
			t.Fatalf("a signed webhook got %q, want 202 and an id\n%s", line, out)
		}
		ids[f[2]] = true
	}
	if len(ids) != 40 {
		t.Fatalf("%d distinct ids, want 40\n%s", len(ids), out)
	}
	sink.WaitFor(t, 60*time.Second, "40 webhooks", func(as []Arrival) bool {
		return len(as) >= 40
	})
	caDuring, _ := os.ReadFile(caPath)

	// A Go sender that read the bundle once, before the reload.
	pool := x509.NewCertPool()
	bundlePEM, _ := os.ReadFile(bundle)
	if !pool.AppendCertsFromPEM(bundlePEM) {
		t.Fatal("no certificate in the bundle")
	}
	proxyURL, _ := url.Parse("http://" + hp.Proxy)
	goSender := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{RootCAs: pool}}}

	// A reload that names a host: the CA is not re-issued.
	reloadWith(t, hp, cfg+fmt.Sprintf("hosts:\n  \"new.partner.test:%s\": {rate: 5/s}\n", port), 1)
	caAfter, _ := os.ReadFile(caPath)
	if p := hookpaceCA(t, hp, "cert"); p != caPath {
		t.Fatalf("hookpace ca cert now prints %s, was %s", p, caPath)
	}
	if !bytes.Equal(caBefore, caDuring) || !bytes.Equal(caBefore, caAfter) {
		t.Fatal("the CA's bytes changed with the hosts")
	}
	if strings.Contains(hp.Log(), "re-issued") {
		t.Fatalf("the CA was re-issued:\n%s", grepLines(hp.Log(), "re-issued"))
	}

	// The Go sender, not restarted, verifies a name it never saw.
	for _, name := range []string{"new.partner.test", "p40.partner.test"} {
		req, _ := http.NewRequest("POST", "https://"+name+":"+port+"/hooks/go-"+name, strings.NewReader(`{"via":"go"}`))
		req.Header.Set("Webhook-Signature", "v1,c2lnbmVk")
		resp, err := goSender.Do(req)
		if err != nil {
			t.Fatalf("the Go sender started before the reload, to %s: %v", name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("the Go sender to %s: %d, want 202", name, resp.StatusCode)
		}
	}

	// A new session after the reload: an API call, a GET, a stream.
	py = exec.Command(debianPython, "-c", `
import sys, requests
port = sys.argv[1]
s = requests.Session()
r = s.post("https://api.partner.test:%s/v1/charges" % port, json={"amount": 100})
print("charge", r.status_code, r.headers.get("X-Sink"), r.headers.get("X-Hookpace-Id"), r.text)
r = s.get("https://p7.partner.test:%s/get" % port)
print("get", r.status_code, r.text)
r = s.get("https://api.partner.test:%s/stream" % port, stream=True)
print("stream", r.status_code, "".join(c.decode() for c in r.iter_content(chunk_size=None)))
r = s.post("https://new.partner.test:%s/hooks/new" % port, json={"n": 41}, headers={"webhook-signature": "v1,c2lnbmVk"})
print("new", r.status_code, r.headers.get("X-Hookpace-Id"))
`, port)
	py.Env = appEnv("HTTPS_PROXY=http://"+hp.Proxy, "REQUESTS_CA_BUNDLE="+bundle)
	out, err = py.CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	for _, want := range []string{
		`charge 402 charges None {"error":"card_declined"}`,
		"get 200 hello from p7.partner.test:" + port,
		"stream 200 chunk0;chunk1;chunk2;",
		"new 202 ",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("python printed no %q:\n%s", want, out)
		}
	}
	sink.WaitFor(t, 30*time.Second, "the 41st webhook", func(as []Arrival) bool {
		return len(as) >= 46
	})
	seen := map[string]int{}
	for _, a := range sink.Arrivals() {
		if strings.HasPrefix(a.Path, "/hooks/") {
			seen[a.Path]++
			if id := a.Header.Get("X-Hookpace-Id"); !ids[id] && !strings.HasPrefix(a.Path, "/hooks/go-") && a.Path != "/hooks/new" {
				t.Errorf("%s arrived with X-Hookpace-Id %q, not one the app got", a.Path, id)
			}
			continue
		}
		if a.Header.Get("X-Hookpace-Id") != "" {
			t.Errorf("the API call %s %s was spooled (X-Hookpace-Id %s)", a.Method, a.Path, a.Header.Get("X-Hookpace-Id"))
		}
	}
	for i := 1; i <= 40; i++ {
		if n := seen[fmt.Sprintf("/hooks/%d", i)]; n != 1 {
			t.Errorf("webhook %d arrived %d times", i, n)
		}
	}
	if !strings.Contains(hp.Log(), "webhook_rule=webhooks[0]") {
		t.Errorf("no ingest line names the rule:\n%s", grepLines(hp.Log(), "ingest"))
	}
	if m := hp.Metrics(); !strings.Contains(m, `hookpace_forwarded_total{host="api.partner.test:`+port+`"`) {
		t.Errorf("no forwarded count for api.partner.test:\n%s", grepLines(m, "forwarded"))
	}

	// The status page and /v1/instance: the open-world CA, and the API
	// calls counted by host as requests.
	var inst struct {
		HTTPS struct {
			Open      bool
			Excluded  []string
			Forwarded []struct {
				Host  string
				Count int64
			}
		}
	}
	hp.AdminJSON("/v1/instance", &inst)
	if !inst.HTTPS.Open || !slices.Contains(inst.HTTPS.Excluded, "cluster.local") {
		t.Errorf("/v1/instance: https %+v, want the open-world CA", inst.HTTPS)
	}
	var apiCalls int64
	for _, f := range inst.HTTPS.Forwarded {
		if f.Host == "api.partner.test:"+port {
			apiCalls = f.Count
		}
	}
	if apiCalls != 2 { // the charge and the stream
		t.Errorf("/v1/instance: %d requests forwarded to api.partner.test, want 2: %+v", apiCalls, inst.HTTPS.Forwarded)
	}
	resp, err := http.Get("http://" + hp.Admin + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"open-world CA intercepts <strong>any partner name</strong>", `<table id="forwarded">`, `data-host="api.partner.test:` + port + `"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the status page lacks %q", want)
		}
	}

	status, err := hp.CLI("status")
	if err != nil {
		t.Fatalf("hookpace status: %v\n%s", err, status)
	}
	for _, want := range []string{"hookpace's open-world CA intercepts any partner name", "forwarded as API calls (not webhooks): api.partner.test:" + port + " (2 requests)"} {
		if !strings.Contains(status, want) {
			t.Errorf("hookpace status lacks %q:\n%s", want, status)
		}
	}

	// A CONNECT to an IP: passed through, never one of hookpace's leaves.
	var issuer atomic.Value
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			issuer.Store(cs.PeerCertificates[0].Issuer.CommonName)
			return nil
		},
	}}}
	resp, err = c.Get("https://127.0.0.1:" + port + "/get")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := issuer.Load(); got != "partner test CA" {
		t.Errorf("a CONNECT to 127.0.0.1 was answered with a certificate issued by %v, want the partner's own", got)
	}
	Poll(t, 30*time.Second, "the IP's passthrough with its reason", func() bool {
		return strings.Contains(hp.Log(), "never vouches for an IP address")
	})
}

// TestOpenWorldLateHost: a requests.Session posting every 200 ms to a
// host whose CONNECTs pass through (connect: tunnel) keeps its tunnel
// alive; when a reload names the host with a rate, hookpace closes that
// tunnel, and from 1 s after the reload at most one webhook goes around:
// the session's next request comes through a new CONNECT and is paced.
func TestOpenWorldLateHost(t *testing.T) {
	t.Parallel()
	sink, sinkCA, port := openWorldSink(t, "late.partner.test")
	base := fmt.Sprintf(`
mitm: {scope: open}
egress: {allow: ["127.0.0.1"]}
tls: {ca_file: %s}
`, sinkCA)
	hp := StartResolving(t, base+fmt.Sprintf("hosts:\n  \"late.partner.test:%s\": {connect: tunnel}\n", port), "late.partner.test")
	// The app trusts hookpace's CA and, for the tunnel, the partner's own.
	bundle, err := os.ReadFile(hookpaceCA(t, hp, "bundle"))
	if err != nil {
		t.Fatal(err)
	}
	partner, _ := os.ReadFile(sinkCA)
	trust := filepath.Join(t.TempDir(), "trust.pem")
	if err := os.WriteFile(trust, append(bundle, partner...), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := filepath.Join(t.TempDir(), "stop")
	py := exec.Command(debianPython, "-c", `
import os, sys, time, requests
url, stop = sys.argv[1], sys.argv[2]
s = requests.Session()
i = 0
while not os.path.exists(stop) and i < 300:
    i += 1
    try:
        r = s.post(url, json={"n": i}, headers={"webhook-signature": "v1,c2lnbmVk"})
        print(i, r.status_code, r.headers.get("X-Hookpace-Id"), flush=True)
    except Exception as e:
        print(i, "error", type(e).__name__, flush=True)
    time.sleep(0.2)
`, "https://late.partner.test:"+port+"/hooks", stop)
	py.Env = appEnv("HTTPS_PROXY=http://"+hp.Proxy, "REQUESTS_CA_BUNDLE="+trust)
	var out bytes.Buffer
	py.Stdout, py.Stderr = &out, &out
	dieWithTest(py)
	if err := py.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile(stop, nil, 0o644); py.Wait() })
	sink.WaitFor(t, 30*time.Second, "webhooks through the tunnel", func(as []Arrival) bool { return len(as) >= 3 })

	reloadWith(t, hp, base+fmt.Sprintf("hosts:\n  \"late.partner.test:%s\": {rate: 20/s}\n", port), 1)
	reloaded := time.Now()
	sink.WaitFor(t, 30*time.Second, "paced webhooks after the reload", func(as []Arrival) bool {
		n := 0
		for _, a := range as {
			if a.Header.Get("X-Hookpace-Id") != "" {
				n++
			}
		}
		return n >= 3
	})
	os.WriteFile(stop, nil, 0o644)
	around := 0
	for _, a := range sink.Arrivals() {
		if a.Header.Get("X-Hookpace-Id") == "" && a.At.After(reloaded.Add(time.Second)) {
			around++
		}
	}
	if around > 1 {
		t.Errorf("%d webhooks went around hookpace from 1 s after the reload\n%s", around, out.String())
	}
	Poll(t, 30*time.Second, "the closed tunnel's line", func() bool {
		return strings.Contains(hp.Log(), "closed passed-through tunnels to a host now intercepted")
	})
}

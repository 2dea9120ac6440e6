package e2e

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// TestProxyModeTransparent is TestCaptureTransparent in proxy mode: the
// same namespace, servers, partners, config (open-world CA, egress open to
// the two documentation ranges) and app, hookpace without capture, and
// the app as uid 65534 with the proxy variables `hookpace inject` sets for
// a platform whose internal services are 10.0.0.0/8 and *.corp.test
// (--service-cidr, --no-proxy): HTTP_PROXY and HTTPS_PROXY at hookpace's
// listener, NO_PROXY with those (the FAQ: NO_PROXY holds everything that
// is not a webhook to a partner). Each of the 13 calls prints what it
// prints run directly.
//
// Through hookpace (CONNECT): the mTLS API (the server asks for a client
// certificate: spliced, reason client-certificate), the h2-only API and
// the gRPC-style call (the client offers h2 alone: spliced, reason alpn),
// SSE, 50 MiB down, 20 MiB up and the 100-continue PUT (intercepted with
// hookpace's CA, in h2, and forwarded as they stream). Direct: the
// internal API over http and https (billing.corp.test is in NO_PROXY),
// the WebSocket (x/net/websocket dials without reading proxy variables)
// and raw TCP, client and server first (net.Dial does not either). The 7 signed webhooks go through
// hookpace (CONNECT for https, proxy-form requests for http), get 202 with
// an id and arrive once with it.
func TestProxyModeTransparent(t *testing.T) {
	t.Parallel()
	w := newTransparentWorld(t)
	hp, trust := w.start(t, "")
	want := w.direct(t, trust)

	proxied := w.ns.asNobody(w.app, w.pki.certFile, w.pki.keyFile, "webhooks")
	proxied.Env = appEnv(append(injectedProxyVars(t, hp, "--service-cidr", "10.0.0.0/8", "--no-proxy", ".corp.test"),
		"HOME="+w.pub, "SSL_CERT_FILE="+trust)...)
	out, err := proxied.CombinedOutput()
	if err != nil {
		t.Fatalf("the app through the proxy: %v\n%s", err, out)
	}
	got := string(out)
	same := sameAsDirect(t, want, got, "proxied")
	for _, must := range []string{`mtls 200 HTTP/1.1 "hello billing-app" via corp internal CA`, `h2-only 200 HTTP/2.0 "h2 only: HTTP/2.0" via corp internal CA`,
		`grpc-trailers HTTP/2.0 00000000020807 grpc-status="0" grpc-message="ok"`, "first-event-within-1s=true", "upload-20MiB HTTP/2.0 200",
		`internal-https 200 HTTP/2.0 "billing billing.corp.test" via corp internal CA`} {
		if !strings.Contains(got, must) {
			t.Errorf("proxied output lacks %q:\n%s", must, got)
		}
	}
	t.Logf("%d of 13 non-webhook calls as direct", same)
	w.webhooksOnce(t, got)

	tl, status := w.tunnelSeries(t, hp)
	for _, want := range []string{`host="mtls.hooks.test",mode="passthrough",reason="client-certificate"`,
		`host="h2.hooks.test",mode="passthrough",reason="alpn"`, `host="stream.hooks.test",mode="intercepted"`,
		`host="partner4.hooks.test",mode="intercepted"`, `host="partner6.hooks.test",mode="intercepted"`} {
		if !strings.Contains(tl, want) {
			t.Errorf("hookpace_tunnels_total has no %s series:\n%s", want, tl)
		}
	}
	// What NO_PROXY names, and what ignores the variables, never reached hookpace.
	for _, never := range []string{"billing.corp.test", "10.1.2.3", "raw.hooks.test", "203.0.113.23"} {
		if strings.Contains(tl, never) || strings.Contains(status, never) || strings.Contains(hp.Log(), never) {
			t.Errorf("%s reached hookpace:\n%s\n%s", never, tl, grepLines(hp.Log(), never))
		}
	}
	// hookpace status lists each splice with its reason, and the calls it forwarded.
	for row, want := range map[string]string{"passed through unpaced: mtls.hooks.test ": "the server asks for a client certificate",
		"passed through unpaced: h2.hooks.test ":  "the client offers h2 and not HTTP/1.1",
		"forwarded as API calls (not webhooks): ": "stream.hooks.test (4 requests)"} {
		if !strings.Contains(grepLines(status, row), want) {
			t.Errorf("hookpace status has no row %q with %q:\n%s", row, want, status)
		}
	}
}

// injectedProxyVars are the proxy variables (HTTP_PROXY, HTTPS_PROXY,
// NO_PROXY and their lower-case twins) hookpace inject sets on an app
// container, with flags, pointed at hp's proxy listener.
func injectedProxyVars(t *testing.T, hp *Hookpace, flags ...string) []string {
	t.Helper()
	_, port, _ := net.SplitHostPort(hp.Proxy)
	deploy := filepath.Join(t.TempDir(), "deploy.yaml")
	if err := os.WriteFile(deploy, []byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: billing}
spec:
  selector: {matchLabels: {app: billing}}
  template:
    metadata: {labels: {app: billing}}
    spec:
      containers: [{name: app, image: registry.example.com/billing:1}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary, append([]string{"inject", "-f", deploy, "--proxy-port", port}, flags...)...).Output()
	if err != nil {
		t.Fatalf("hookpace inject: %v\n%s", err, out)
	}
	var d appsv1.Deployment
	if err := sigsyaml.Unmarshal(out, &d); err != nil || len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("hookpace inject's output: %v\n%s", err, out)
	}
	var vars []string
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if strings.HasSuffix(strings.ToUpper(e.Name), "_PROXY") {
			vars = append(vars, e.Name+"="+e.Value)
		}
	}
	if len(vars) != 6 {
		t.Fatalf("hookpace inject set %d proxy variables, want 6: %v", len(vars), vars)
	}
	return vars
}

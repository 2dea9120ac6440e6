package e2e

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestOpenWorldCANamesOnlyPartners: with defaults.connect: mitm and
// hookpace's own open-world CA, a CONNECT to localhost, a single-label
// name or a Kubernetes short form is passed through (the partner's own
// certificate, the partner's own answer), never answered with a leaf that
// hookpace's CA signed; a three-label partner name is intercepted (the
// control that shows the check can fail).
func TestOpenWorldCANamesOnlyPartners(t *testing.T) {
	t.Parallel()
	cluster := []string{"localhost", "kubernetes", "kubernetes.default", "redis.ns"}
	partner := "hooks.partner.test"
	_, sinkCA, port := openWorldSink(t, append([]string{partner}, cluster...)...)
	hp := StartResolving(t, fmt.Sprintf(`
defaults: {connect: mitm}
egress: {allow: ["127.0.0.1"]}
tls: {ca_file: %s}
`, sinkCA), append([]string{partner}, cluster[1:]...)...)
	caPEM, err := os.ReadFile(hookpaceCA(t, hp, "cert"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(caPEM)
	if block == nil {
		t.Fatal("no PEM block in hookpace's CA file")
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sinkRoots := x509.NewCertPool()
	sinkPEM, _ := os.ReadFile(sinkCA)
	sinkRoots.AppendCertsFromPEM(sinkPEM)

	for _, name := range append(cluster, partner) {
		leaf, body := doorsConnectGet(t, hp.Proxy, name, port)
		signed := leaf.CheckSignatureFrom(ca) == nil
		if name == partner {
			if !signed {
				t.Errorf("%s: the leaf is not hookpace's (issuer %q): the open-world CA does not intercept a partner", name, leaf.Issuer)
			}
			continue
		}
		if signed {
			t.Errorf("%s: hookpace's CA signed a leaf for it (%v)", name, leaf.DNSNames)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: sinkRoots, DNSName: name}); err != nil {
			t.Errorf("%s: the leaf is not the partner's own: %v", name, err)
		}
		if want := "hello from " + name + ":" + port; body != want {
			t.Errorf("%s: GET through the tunnel answered %q, want %q", name, body, want)
		}
	}
	m := hp.Metrics()
	for _, name := range cluster {
		if !strings.Contains(m, `hookpace_tunnels_total{host="`+name+":"+port+`",mode="passthrough"} 1`) {
			t.Errorf("%s: not counted as passed through:\n%s", name, grepLines(m, "hookpace_tunnels_total"))
		}
	}
}

// doorsConnectGet opens a CONNECT tunnel to name:port through proxy, completes
// a TLS handshake whatever the certificate, and GETs /get inside it: the
// leaf presented and the answer's body.
func doorsConnectGet(t *testing.T, proxy, name, port string) (*x509.Certificate, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxy, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	target := net.JoinHostPort(name, port)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT %s: %v %v", target, resp, err)
	}
	tc := tls.Client(&doorsBufConn{Conn: c, r: br}, &tls.Config{ServerName: name, InsecureSkipVerify: true})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("%s: handshake: %v", name, err)
	}
	leaf := tc.ConnectionState().PeerCertificates[0]
	fmt.Fprintf(tc, "GET /get HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target)
	got, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatalf("%s: GET inside the tunnel: %v", name, err)
	}
	defer got.Body.Close()
	body, _ := io.ReadAll(got.Body)
	return leaf, string(body)
}

// doorsBufConn reads what a bufio.Reader holds before the connection's bytes.
type doorsBufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *doorsBufConn) Read(p []byte) (int, error) { return b.r.Read(p) }

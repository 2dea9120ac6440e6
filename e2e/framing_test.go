package e2e

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// framingDoors starts one hookpace with a CA and returns it with a way
// to open each of its three HTTP parsers: the proxy listener itself
// ("door", absolute-form), plain HTTP inside a CONNECT tunnel ("tunnel")
// and an intercepted TLS tunnel ("mitm"). Each opener returns the
// connection, and the request target and Host header to write on it for
// path.
func framingDoors(t *testing.T, extra string) (*Hookpace, map[string]opener) {
	t.Helper()
	caDir := filepath.Join(t.TempDir(), "ca")
	if out, err := exec.Command(binary, "ca", "init", "--dir", caDir, "--unconstrained").CombinedOutput(); err != nil {
		t.Fatalf("hookpace ca init: %v\n%s", err, out)
	}
	caCert, caKey := filepath.Join(caDir, "ca.crt"), filepath.Join(caDir, "ca.key")
	plain, secure := NewReceiver(t), NewTLSReceiver(t)
	trust := []string{"SSL_CERT_FILE=" + secRootsPEM(t, secure.Certificate())}
	hp := StartEnv(t, trust, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
mitm: {ca_cert: %s, ca_key: %s}
hosts:
  "%s": {connect: mitm}
%s`, caCert, caKey, secure.Host(), extra))
	roots := x509.NewCertPool()
	pemBytes, err := os.ReadFile(caCert)
	if err != nil || !roots.AppendCertsFromPEM(pemBytes) {
		t.Fatalf("reading %s: %v", caCert, err)
	}
	tunnel := func(rc *Receiver) net.Conn {
		c, err := tunnelDial(hp.Proxy, rc.Host(), "")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return hp, map[string]opener{
		"door": func(path string) (net.Conn, string, string) {
			c, err := net.Dial("tcp", hp.Proxy)
			if err != nil {
				t.Fatal(err)
			}
			return c, plain.URL + path, plain.Host()
		},
		"tunnel": func(path string) (net.Conn, string, string) { return tunnel(plain), path, plain.Host() },
		"mitm": func(path string) (net.Conn, string, string) {
			tc := tls.Client(tunnel(secure), &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
			if err := tc.Handshake(); err != nil {
				t.Fatalf("TLS handshake inside the tunnel: %v", err)
			}
			return tc, path, secure.Host()
		},
	}
}

type opener func(path string) (c net.Conn, target, host string)

var doorNames = []string{"door", "tunnel", "mitm"}

// A request with both Content-Length and Transfer-Encoding:
// chunked, whose chunks end before its Content-Length does, followed on
// the same connection by a second request. A front end going by the
// Content-Length sees one request; hookpace reads the chunks, so it must
// close the connection after its answer (RFC 9112 §6.3) and never read
// the bytes after the chunks as a request of their own. Checked on every
// parser: the proxy listener, plain HTTP in a CONNECT tunnel, and MITM.
func TestSmugglingClosesTheConnection(t *testing.T) {
	t.Parallel()
	hp, doors := framingDoors(t, "")
	for _, name := range doorNames {
		t.Run(name, func(t *testing.T) {
			c, first, host := doors[name]("/first-" + name)
			defer c.Close()
			c.SetDeadline(time.Now().Add(30 * time.Second)) // a hang guard, not an assertion
			smuggled := strings.Replace(first, "/first-", "/smuggled-", 1)
			second := "POST " + smuggled + " HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 2\r\n\r\n{}"
			body := "2\r\n{}\r\n0\r\n\r\n" + second
			req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
				"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n%s", first, host, len(body), body)
			if _, err := io.WriteString(c, req); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer to the first request: %v", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			t.Logf("first request: %d, Connection: %q", resp.StatusCode, resp.Header.Get("Connection"))
			if next, err := http.ReadResponse(br, nil); err == nil {
				next.Body.Close()
				t.Fatalf("a second answer (%d) on the same connection: the bytes after the chunks were read as a request", next.StatusCode)
			}
			if !resp.Close {
				t.Errorf("the answer to a chunked request does not say Connection: close")
			}
			// The connection is closed: nothing more can be read from it.
			if strings.Contains(hp.Log(), "/smuggled-"+name) {
				t.Fatalf("the smuggled request reached hookpace:\n%s", grepLines(hp.Log(), "smuggled"))
			}
		})
	}
}

// A body trickled inside a tunnel (plain or intercepted) is cut
// off with 408 at proxy.body_timeout, as on the proxy listener, and
// nothing is stored.
func TestSlowBodyInsideTunnelGets408(t *testing.T) {
	t.Parallel()
	hp, doors := framingDoors(t, "proxy: {body_timeout: 1s}\n")
	for _, name := range doorNames {
		t.Run(name, func(t *testing.T) {
			c, target, host := doors[name]("/slow-" + name)
			defer c.Close()
			status, sent := trickleOn(c, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n",
				target, host), 1000, 100*time.Millisecond)
			if !strings.Contains(status, " 408 ") {
				t.Fatalf("trickling client got %q after %d of 1000 body bytes, want 408", status, sent)
			}
			t.Logf("cut off with %q after %d of 1000 body bytes (one per 100 ms)", status, sent)
		})
	}
	var sp struct{ Messages int }
	hp.AdminJSON("/v1/spool", &sp)
	if sp.Messages != 0 {
		t.Errorf("%d cut-off webhooks were stored", sp.Messages)
	}
}

// trickleOn writes head on c, then one body byte every interval until an
// answer comes (or all n are sent); it returns the answer's status line
// and how many body bytes went out.
func trickleOn(c net.Conn, head string, n int, interval time.Duration) (status string, sent int) {
	c.SetDeadline(time.Now().Add(60 * time.Second)) // a hang guard, not an assertion
	if _, err := io.WriteString(c, head); err != nil {
		return err.Error(), 0
	}
	answered := make(chan string, 1)
	go func() {
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil && line == "" {
			line = err.Error()
		}
		answered <- strings.TrimSpace(line)
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for sent < n {
		select {
		case s := <-answered:
			return s, sent
		case <-tick.C:
			if _, err := c.Write([]byte("x")); err != nil {
				return <-answered, sent
			}
			sent++
		}
	}
	return <-answered, sent
}

// A tunnel keeps its client's slot of proxy.max_connections, and a body
// trickled inside it is cut off at proxy.body_timeout, which frees the
// slot: with every slot held by tunnels trickling their bodies, a normal
// webhook is answered once one of them is cut off, not before, and never
// waits for them to finish.
//
// The order is checked against hookpace's own clock, not the order in
// which two goroutines here notice their answers: no tunnel can be cut off
// before body_timeout has passed since it was opened, so a webhook that
// waited for a slot is answered at least body_timeout after the first
// tunnel was opened.
func TestSlowTunnelsHoldNoSlotPastBodyTimeout(t *testing.T) {
	t.Parallel()
	const bodyTimeout = 2 * time.Second
	hp, doors := framingDoors(t, fmt.Sprintf("proxy: {max_connections: 2, body_timeout: %s}\n", bodyTimeout))
	rc := NewReceiver(t)
	done := make(chan struct{}, 2)
	opened := time.Now()
	for _, name := range []string{"tunnel", "mitm"} {
		c, target, host := doors[name]("/slow-" + name)
		go func() {
			defer func() { done <- struct{}{} }()
			defer c.Close()
			status, _ := trickleOn(c, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 1000\r\n\r\n", target, host),
				1000, 200*time.Millisecond)
			if !strings.Contains(status, " 408 ") {
				t.Errorf("%s: %q, want 408", name, status)
			}
		}()
	}
	status, _ := hp.Post(hp.Client(), rc.URL+"/normal", WebhookBody(1), nil)
	waited := time.Since(opened)
	if status != http.StatusAccepted {
		t.Fatalf("the normal webhook: %d, want 202", status)
	}
	if waited < bodyTimeout {
		t.Errorf("the normal webhook was answered %v after the tunnels opened, before body_timeout (%v) could cut one off: the tunnels did not hold their slots", waited, bodyTimeout)
	}
	<-done
	<-done
}

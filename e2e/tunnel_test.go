package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// tunnelClient sends every request through a CONNECT tunnel that it opens
// to the request's host, as undici's ProxyAgent does even for http://
// URLs: the requests inside are origin-form, and the proxy sees them only
// as bytes in the tunnel. auth, when set, goes on the CONNECT only.
func tunnelClient(hp *Hookpace, auth string) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := tunnelDial(hp.Proxy, addr, auth)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: nil, DialContext: dial, DisableKeepAlives: false}}
}

// tunnelError is a CONNECT refused with status.
type tunnelError struct {
	status int
	body   string
}

func (e *tunnelError) Error() string { return fmt.Sprintf("CONNECT: %d %s", e.status, e.body) }

// tunnelDial opens a CONNECT tunnel to addr through proxy.
func tunnelDial(proxy, addr, auth string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", proxy, 10*time.Second)
	if err != nil {
		return nil, err
	}
	req := "CONNECT " + addr + " HTTP/1.1\r\nHost: " + addr + "\r\n"
	if auth != "" {
		req += "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(auth)) + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		c.Close()
		return nil, err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		c.Close()
		return nil, &tunnelError{resp.StatusCode, strings.TrimSpace(string(b))}
	}
	if br.Buffered() > 0 {
		c.Close()
		return nil, fmt.Errorf("CONNECT: %d bytes after the 200", br.Buffered())
	}
	return c, nil
}

// Plain HTTP inside a CONNECT tunnel. POSTs are spooled and
// paced like absolute-form ones (202 with an id, delivered later), other
// methods pass through, and a request for another host is refused.
func TestPlainHTTPInsideTunnel(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	rc.Handle = func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("X-Receiver", "yes")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "receiver says hi")
	}
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 20/s, burst: 1, concurrency: 1}
`, rc.Host()))
	c := tunnelClient(hp, "")
	defer c.CloseIdleConnections()
	const n = 30
	ids := map[string]bool{}
	start := time.Now()
	for i := range n {
		status, id := hp.Post(c, fmt.Sprintf("%s/tunnel/%d", rc.URL, i), WebhookBody(i), http.Header{"Content-Type": {"application/json"}})
		if status != http.StatusAccepted || id == "" {
			t.Fatalf("POST %d inside a tunnel: status %d, id %q; want 202 with an id", i, status, id)
		}
		ids[id] = true
	}
	if len(ids) != n {
		t.Fatalf("%d distinct ids for %d webhooks", len(ids), n)
	}
	rc.WaitFor(t, 20*time.Second, "every tunnelled webhook", func(as []Arrival) bool { return len(as) >= n })
	as := rc.Arrivals()
	// Paced at 20/s burst 1: 30 sends take at least 29/20 s from the first.
	if took := as[n-1].At.Sub(as[0].At); took < 1300*time.Millisecond {
		t.Errorf("%d deliveries in %v: not paced at 20/s", n, took)
	}
	for i, a := range as {
		if a.Method != http.MethodPost || !strings.HasPrefix(a.Path, "/tunnel/") {
			t.Fatalf("arrival %d: %s %s", i, a.Method, a.Path)
		}
	}
	t.Logf("%d webhooks through a tunnel: all 202 at once, delivered over %v", n, as[n-1].At.Sub(start).Round(time.Millisecond))

	// A GET inside the tunnel passes through: the receiver's own answer.
	resp, err := c.Get(rc.URL + "/status")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Receiver") != "yes" || string(body) != "receiver says hi" {
		t.Fatalf("GET inside a tunnel: %d %v %q; want the receiver's answer", resp.StatusCode, resp.Header, body)
	}

	// A request naming another host than the tunnel's is refused.
	conn, err := tunnelDial(hp.Proxy, rc.Host(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "POST /x HTTP/1.1\r\nHost: 127.0.0.2:9\r\nContent-Length: 2\r\n\r\n{}")
	resp, err = http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "inside a tunnel") {
		t.Fatalf("POST for another host inside a tunnel: %d %q; want 400", resp.StatusCode, body)
	}
	if got := rc.Count(func(a Arrival) bool { return a.Path == "/x" }); got != 0 {
		t.Fatalf("the mismatched request reached the receiver")
	}
	if !strings.Contains(hp.Log(), `decision=accepted`) {
		t.Errorf("no ingest line for the tunnelled POSTs:\n%s", hp.Log())
	}
}

// Inside a tunnel the same rules hold as for absolute-form POSTs: the
// egress guard (a denied destination is refused at the CONNECT), proxy
// auth (the CONNECT's credentials), and spool.max_body.
func TestTunnelKeepsTheRules(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, `
egress: {allow: ["127.0.0.0/8"], deny: ["127.0.0.3/32"]}
auth: {users: [{username: app, password: s3cret}]}
spool: {max_body: 1KiB}
`)
	// Egress: refused at the CONNECT, with the reason.
	_, err := tunnelDial(hp.Proxy, "127.0.0.3:80", "app:s3cret")
	if te, ok := err.(*tunnelError); !ok || te.status != http.StatusForbidden || !strings.Contains(te.body, "refused") {
		t.Fatalf("CONNECT to a denied address: %v; want 403 with the reason", err)
	}
	// Auth: no credentials, no tunnel.
	if _, err := tunnelDial(hp.Proxy, rc.Host(), ""); err == nil || err.(*tunnelError).status != http.StatusProxyAuthRequired {
		t.Fatalf("CONNECT without credentials: %v; want 407", err)
	}
	c := tunnelClient(hp, "app:s3cret")
	defer c.CloseIdleConnections()
	if status, id := hp.Post(c, rc.URL+"/ok", []byte(`{"ok":1}`), nil); status != http.StatusAccepted || id == "" {
		t.Fatalf("POST in an authorized tunnel: %d %q", status, id)
	}
	if status, _ := hp.Post(c, rc.URL+"/big", []byte(strings.Repeat("x", 2048)), nil); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("2 KiB POST in a tunnel with max_body 1KiB: %d, want 413", status)
	}
	rc.WaitFor(t, 10*time.Second, "the webhook", func(as []Arrival) bool { return len(as) >= 1 })
	if a := rc.Arrivals()[0]; a.Path != "/ok" || a.Header.Get("Proxy-Authorization") != "" {
		t.Fatalf("arrival %s with Proxy-Authorization %q; want /ok without credentials", a.Path, a.Header.Get("Proxy-Authorization"))
	}
}

// pool trusts rc's self-signed certificate.
func pool(rc *Receiver) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(rc.Certificate())
	return p
}

// A TLS tunnel keeps the host's connect policy: deny ends it at the
// handshake; connect: tunnel splices it through to the receiver.
func TestTLSTunnelKeepsConnectPolicy(t *testing.T) {
	t.Parallel()
	denied := NewTLSReceiver(t)
	spliced := NewTLSReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {connect: tunnel}
  "%s": {connect: deny}
`, spliced.Host(), denied.Host()))
	tlsGet := func(rc *Receiver) (*http.Response, error) {
		conn, err := tunnelDial(hp.Proxy, rc.Host(), "")
		if err != nil {
			return nil, err
		}
		tc := tls.Client(conn, &tls.Config{RootCAs: pool(rc), ServerName: "127.0.0.1"})
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			conn.Close()
			return nil, err
		}
		io.WriteString(tc, "GET /tls HTTP/1.1\r\nHost: "+rc.Host()+"\r\nConnection: close\r\n\r\n")
		return http.ReadResponse(bufio.NewReader(tc), nil)
	}
	if resp, err := tlsGet(denied); err == nil {
		resp.Body.Close()
		t.Fatalf("TLS through a tunnel under connect: deny: %d, want the handshake refused", resp.StatusCode)
	} else {
		t.Logf("connect: deny, TLS inside: %v", err)
	}
	if denied.Count(nil) != 0 {
		t.Fatal("the denied TLS tunnel reached its receiver")
	}
	Poll(t, 5*time.Second, "the refusal in the log", func() bool {
		return strings.Contains(hp.Log(), "decision=refused") && strings.Contains(hp.Log(), "cannot spool or pace an encrypted tunnel")
	})
	resp, err := tlsGet(spliced)
	if err != nil {
		t.Fatalf("TLS through a tunnel under connect: tunnel: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || spliced.Count(nil) != 1 {
		t.Fatalf("connect: tunnel: status %d, %d arrivals; want the receiver's 200", resp.StatusCode, spliced.Count(nil))
	}
}

// Under connect: tunnel, a tunnel whose server speaks first (as SMTP's
// does) while its client waits is spliced through, greeting first.
func TestServerFirstTunnelIsSpliced(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.WriteString(c, "220 banner\r\n")
				io.Copy(c, c) // then echo
			}()
		}
	}()
	addr := ln.Addr().String()
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {connect: tunnel}
`, addr))
	conn, err := tunnelDial(hp.Proxy, addr, "")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	if line, err := br.ReadString('\n'); err != nil || line != "220 banner\r\n" {
		t.Fatalf("banner through the tunnel: %q, %v", line, err)
	}
	io.WriteString(conn, "EHLO x\r\n")
	if line, err := br.ReadString('\n'); err != nil || line != "EHLO x\r\n" {
		t.Fatalf("echo through the tunnel: %q, %v", line, err)
	}
}

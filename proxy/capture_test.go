package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/mitm"
)

func TestCaptureURL(t *testing.T) {
	dst := netip.MustParseAddrPort("127.0.0.1:8080")
	for _, tc := range []struct{ host, uri, want string }{
		{"partner.example", "/hook?x=1", "http://partner.example:8080/hook?x=1"},         // Host names the host
		{"partner.example:9999", "/hook", "http://partner.example:8080/hook"},            // the port dialled wins
		{"", "/hook", "http://127.0.0.1:8080/hook"},                                      // no Host: the address dialled
		{"127.0.0.1:8080", "/hook", "http://127.0.0.1:8080/hook"},                        // the same address
		{"10.9.9.9", "/hook", "http://127.0.0.1:8080/hook"},                              // another address: the one dialled
		{"[::1]:8080", "/hook", "http://127.0.0.1:8080/hook"},                            // another address, IPv6
		{"[::1]", "/hook", "http://127.0.0.1:8080/hook"},                                 // IPv6 without a port
		{"partner.example", "http://partner.example/x", "http://partner.example:8080/x"}, // absolute-form
	} {
		in := &http.Request{Host: tc.host}
		var err error
		if in.URL, err = url.ParseRequestURI(tc.uri); err != nil {
			t.Fatal(err)
		}
		if err := captureURL(in, dst); err != nil {
			t.Errorf("Host %q %s: %v", tc.host, tc.uri, err)
			continue
		}
		if in.URL.String() != tc.want {
			t.Errorf("Host %q %s: %s, want %s", tc.host, tc.uri, in.URL, tc.want)
		}
	}
	// An IPv6 Host without a port, to the address dialled.
	in := &http.Request{Host: "[2001:db8::10]", URL: &url.URL{Path: "/x"}}
	if err := captureURL(in, netip.MustParseAddrPort("[2001:db8::10]:80")); err != nil || in.URL.String() != "http://[2001:db8::10]:80/x" {
		t.Errorf("Host [2001:db8::10]: %v %v", in.URL, err)
	}
	// A request target that is no path (OPTIONS *) names no webhook.
	star := &http.Request{Host: "partner.example", RequestURI: "*", URL: &url.URL{Path: "*"}}
	if err := captureURL(star, dst); err == nil {
		t.Errorf("OPTIONS * became %s", star.URL)
	}
}

// captureListener serves each connection to a loopback listener as if it
// had been redirected from dst.
func captureListener(t *testing.T, p *Proxy, dst func(self netip.AddrPort) netip.AddrPort) string {
	addr, _ := captureListenerDone(t, p, dst)
	return addr
}

// captureListenerDone is captureListener, and a channel that gets a value
// each time a connection's ServeCapture returns.
func captureListenerDone(t *testing.T, p *Proxy, dst func(self netip.AddrPort) netip.AddrPort) (string, <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	self := ln.Addr().(*net.TCPAddr).AddrPort()
	done := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				p.ServeCapture(context.Background(), c, dst(self), nil)
				done <- struct{}{}
			}()
		}
	}()
	return ln.Addr().String(), done
}

func testCA(t *testing.T) (*mitm.CA, *x509.CertPool) {
	t.Helper()
	cert, key, err := mitm.InitCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := mitm.LoadCA(cert, key, 16)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert())
	return ca, pool
}

// postOver posts one webhook over conn to url and reads the answer.
func postOver(t *testing.T, conn net.Conn, target, host string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, target, strings.NewReader(`{"n":1}`))
	req.Host = host
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	return resp
}

func TestServeCaptureInterceptsBySNI(t *testing.T) {
	var log bytes.Buffer
	p, sp := laneProxy(t, HostPolicy{Connect: ConnectMITM, Named: true}, []User{{Username: "u", Password: "p"}}, &log)
	ca, pool := testCA(t)
	p.SetCA(ca)
	// The app dialled 127.0.0.1:9 for "127.0.0.1" by name: the SNI wins,
	// the original port stays.
	addr := captureListener(t, p, func(netip.AddrPort) netip.AddrPort { return netip.MustParseAddrPort("127.0.0.1:9") })
	conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "localhost", RootCAs: pool})
	if err != nil {
		t.Fatalf("handshake with hookpace's leaf for the SNI: %v", err)
	}
	defer conn.Close()
	// No proxy credentials although proxy auth is on: the redirect is the authorization.
	resp := postOver(t, conn, "https://localhost:9/hook", "localhost:9")
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("X-Hookpace-Id") == "" {
		t.Fatalf("captured https POST: %s, id %q\n%s", resp.Status, resp.Header.Get("X-Hookpace-Id"), log.String())
	}
	ms, err := sp.Queued("localhost:9", 10)
	if err != nil || len(ms) != 1 || ms[0].URL != "https://localhost:9/hook" {
		t.Fatalf("spooled for localhost:9: %v %v", ms, err)
	}
	var found bool
	for _, s := range p.Tunnels() {
		found = found || (s.Host == "localhost:9" && s.Mode == TunnelIntercepted && s.Count == 1)
	}
	if !found {
		t.Errorf("tunnels %+v: want localhost:9 intercepted once", p.Tunnels())
	}
}

func TestServeCaptureDeniesInTLS(t *testing.T) {
	var log bytes.Buffer
	p, _ := laneProxy(t, HostPolicy{Connect: ConnectDeny}, nil, &log)
	addr := captureListener(t, p, func(netip.AddrPort) netip.AddrPort { return netip.MustParseAddrPort("203.0.113.10:443") })
	_, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "partner.example", InsecureSkipVerify: true})
	if err == nil || !strings.Contains(err.Error(), "access denied") {
		t.Fatalf("handshake with connect: deny: %v, want the access_denied alert", err)
	}
	if !strings.Contains(log.String(), "denied (connect: deny)") || !strings.Contains(log.String(), "host=partner.example") {
		t.Errorf("no refusal line for partner.example:\n%s", log.String())
	}
}

func TestServeCapturePlainHTTP(t *testing.T) {
	var log bytes.Buffer
	p, sp := laneProxy(t, HostPolicy{}, nil, &log)
	addr := captureListener(t, p, func(netip.AddrPort) netip.AddrPort { return netip.MustParseAddrPort(laneHost) })
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Origin-form, as an app that dialled its partner sends it; then
	// without Host (HTTP/1.0 style): the address dialled.
	for _, host := range []string{laneHost, ""} {
		resp := postOver(t, conn, "http://"+laneHost+"/hook", host)
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("captured http POST with Host %q: %s\n%s", host, resp.Status, log.String())
		}
	}
	if n := len(queued(t, sp)); n != 2 {
		t.Fatalf("%d spooled for %s, want 2", n, laneHost)
	}
}

func TestServeCaptureRefusesItself(t *testing.T) {
	var log bytes.Buffer
	p, sp := laneProxy(t, HostPolicy{}, nil, &log)
	// Not redirected: the original destination is the listener itself.
	addr, done := captureListenerDone(t, p, func(self netip.AddrPort) netip.AddrPort { return self })
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/hook", strings.NewReader(`{}`))
	req.Write(conn)
	if resp, err := http.ReadResponse(bufio.NewReader(conn), req); err == nil {
		t.Fatalf("a connection to the capture listener itself was answered %s", resp.Status)
	}
	<-done // the refusal is logged
	if !strings.Contains(log.String(), "capture listener itself") {
		t.Errorf("no refusal line:\n%s", log.String())
	}
	if ms, _ := sp.Queued(addr, 10); len(ms) != 0 {
		t.Errorf("spooled %d to the capture listener itself", len(ms))
	}
}

// A client that does not trust hookpace's CA fails its handshake with an
// alert: the rejection is counted for the host, listed apart from its
// interceptions, and warned of once, with the variables that fix it.
func TestRejectedCertificateIsCounted(t *testing.T) {
	var log bytes.Buffer
	p, _ := laneProxy(t, HostPolicy{Connect: ConnectMITM, Named: true}, nil, &log)
	ca, _ := testCA(t)
	p.SetCA(ca)
	addr, done := captureListenerDone(t, p, func(netip.AddrPort) netip.AddrPort { return netip.MustParseAddrPort("127.0.0.1:443") })
	for range 2 {
		// The system roots only, as an app without the trust variable has.
		_, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "localhost"})
		if err == nil {
			t.Fatal("a client without hookpace's CA completed the handshake")
		}
		<-done
	}
	var rejected, intercepted int64
	for _, s := range p.Tunnels() {
		if s.Host == "localhost" && s.Mode == TunnelRejected {
			rejected = s.Count
			if !strings.Contains(s.Reason, "does not trust hookpace's CA") {
				t.Errorf("rejection's reason %q", s.Reason)
			}
		}
		if s.Host == "localhost" && s.Mode == TunnelIntercepted {
			intercepted = s.Count
		}
	}
	if rejected != 2 || intercepted != 2 {
		t.Fatalf("tunnels %+v: want localhost intercepted 2 and rejected 2", p.Tunnels())
	}
	if n := strings.Count(log.String(), "rejected hookpace's certificate"); n != 1 || !strings.Contains(log.String(), "NODE_EXTRA_CA_CERTS") {
		t.Errorf("%d rejection warnings naming the variables, want one:\n%s", n, log.String())
	}
}

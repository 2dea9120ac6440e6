package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestTunnelURL(t *testing.T) {
	for _, tc := range []struct {
		target, host, uri string
		want              string // the absolute URL, or the error's start
		ok                bool
	}{
		{"partner.example:80", "partner.example", "/hook?x=1", "http://partner.example:80/hook?x=1", true},
		{"partner.example:80", "partner.example:80", "/hook", "http://partner.example:80/hook", true},
		{"partner.example:80", "", "/hook", "http://partner.example:80/hook", true},
		{"Partner.Example:8080", "partner.example:8080", "/", "http://Partner.Example:8080/", true},
		{"127.0.0.1:9999", "127.0.0.1:9999", "/hooks", "http://127.0.0.1:9999/hooks", true},
		{"[::1]:9999", "[::1]:9999", "/hooks", "http://[::1]:9999/hooks", true},
		{"partner.example:80", "http://partner.example/hook", "", "http://partner.example/hook", true}, // absolute-form inside
		{"partner.example:80", "other.example", "/hook", "request for other.example inside a tunnel to partner.example", false},
		{"partner.example:8080", "partner.example", "/hook", "request for partner.example inside a tunnel to partner.example:8080", false},
		{"partner.example:80", "http://other.example/hook", "", "request for other.example inside a tunnel to partner.example", false},
		{"partner.example:80", "https://partner.example:80/hook", "", "request for https://partner.example:80/hook inside a tunnel", false},
		{"partner.example:443", "https://partner.example/hook", "", "request for partner.example inside a tunnel to partner.example:443", false},
	} {
		in := &http.Request{Host: tc.host, URL: &url.URL{}}
		if strings.HasPrefix(tc.host, "http") {
			in.URL, _ = url.Parse(tc.host)
			in.Host = in.URL.Host
		} else {
			in.URL, _ = url.ParseRequestURI(tc.uri)
		}
		err := tunnelURL(in, tc.target, "http")
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s in a tunnel to %s: %v", tc.host, tc.target, err)
		case tc.ok && in.URL.String() != tc.want:
			t.Errorf("%s %s in a tunnel to %s: URL %s, want %s", tc.host, tc.uri, tc.target, in.URL, tc.want)
		case !tc.ok && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s in a tunnel to %s: error %v, want %q", tc.host, tc.target, err, tc.want)
		}
	}
}

func TestInnerServerTakesTheOuterLimits(t *testing.T) {
	outer := &http.Server{ReadHeaderTimeout: 7 * time.Second, ReadTimeout: 9 * time.Second, WriteTimeout: 11 * time.Second,
		IdleTimeout: 13 * time.Second, MaxHeaderBytes: 4096}
	connect := httptest.NewRequest(http.MethodConnect, "http://partner.example:80", nil)
	in := innerServer(connect.WithContext(context.WithValue(connect.Context(), http.ServerContextKey, outer)), http.NotFoundHandler())
	if in.ReadHeaderTimeout != 7*time.Second || in.ReadTimeout != 9*time.Second || in.WriteTimeout != 11*time.Second ||
		in.IdleTimeout != 13*time.Second || in.MaxHeaderBytes != 4096 {
		t.Errorf("inner server %+v does not hold the outer server's limits %+v", in, outer)
	}
	if in := innerServer(connect, http.NotFoundHandler()); in.ReadHeaderTimeout != sniffTimeout || in.IdleTimeout != 120*time.Second {
		t.Errorf("inner server without an outer one: %v header, %v idle", in.ReadHeaderTimeout, in.IdleTimeout)
	}
}

// optimisticConn sends a CONNECT in the same write as the tunnel's first
// bytes, and reads the CONNECT's answer before the tunnel's.
type optimisticConn struct {
	net.Conn
	connect string
	br      *bufio.Reader
	status  string
}

func (c *optimisticConn) Write(b []byte) (int, error) {
	if c.connect != "" {
		_, err := c.Conn.Write(append([]byte(c.connect), b...))
		c.connect = ""
		return len(b), err
	}
	return c.Conn.Write(b)
}

func (c *optimisticConn) Read(b []byte) (int, error) {
	if c.status == "" {
		resp, err := http.ReadResponse(c.br, nil)
		if err != nil {
			return 0, err
		}
		c.status = resp.Status
	}
	return c.br.Read(b)
}

// A client that sends its ClientHello in the CONNECT's own write, before
// the 200, gets its tunnel: the bytes net/http read ahead reach the
// server first.
func TestConnectWithEarlyBytes(t *testing.T) {
	p, _ := laneProxy(t, HostPolicy{Connect: ConnectTunnel}, nil, nil)
	front := httptest.NewServer(p)
	defer front.Close()
	partner := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "direct") }))
	defer partner.Close()
	target := partner.Listener.Addr().String()

	raw, err := net.Dial("tcp", front.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(30 * time.Second))
	oc := &optimisticConn{Conn: raw, connect: "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n", br: bufio.NewReader(raw)}
	pool := x509.NewCertPool()
	pool.AddCert(partner.Certificate())
	tc := tls.Client(oc, &tls.Config{RootCAs: pool, ServerName: "example.com"})
	req, _ := http.NewRequest(http.MethodGet, "https://"+target+"/", nil)
	if err := req.Write(tc); err != nil {
		t.Fatalf("the request through the tunnel: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(tc), req)
	if err != nil {
		t.Fatalf("the answer through the tunnel: %v (CONNECT: %q)", err, oc.status)
	}
	body, _ := io.ReadAll(resp.Body)
	if oc.status != "200 Connection established" || string(body) != "direct" {
		t.Errorf("CONNECT %q, answer %q: want 200 and the partner's own", oc.status, body)
	}
}

// connectTLS opens a CONNECT tunnel to target through the proxy at front
// and makes a TLS handshake inside it with cfg.
func connectTLS(t *testing.T, front, target string, cfg *tls.Config) *tls.Conn {
	t.Helper()
	tc := tls.Client(connectRaw(t, front, target), cfg)
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake through the tunnel: %v", err)
	}
	return tc
}

// connectRaw opens a CONNECT tunnel to target through the proxy at front.
func connectRaw(t *testing.T, front, target string) net.Conn {
	t.Helper()
	raw, err := net.Dial("tcp", front)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	raw.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(raw, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(raw)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT %s: %v %v", target, resp, err)
	}
	return &peekedConn{Conn: raw, r: br}
}

// Through a CONNECT as through capture, what hookpace cannot serve in
// the middle is spliced (peekCases), and a reload leaves it open.
func TestConnectPeeksBeforeIntercepting(t *testing.T) {
	for _, tc := range peekCases {
		t.Run(tc.name, func(t *testing.T) {
			srv, p, sp := peekSetup(t, tc.server)
			front := httptest.NewServer(p)
			t.Cleanup(front.Close)
			target := srv.Listener.Addr().String()
			conn := connectTLS(t, front.Listener.Addr().String(), target, &tls.Config{ServerName: "api.example", InsecureSkipVerify: true, NextProtos: tc.client})
			p.SetPolicy(*p.policy.Load()) // a reload
			checkSpliced(t, conn, srv, p, sp, target, tc.reason)
		})
	}
}

// A client that offers h2 and HTTP/1.1 in an intercepted CONNECT tunnel
// speaks h2 with hookpace, as it would with its partner: its webhook is
// spooled and answered 202.
func TestConnectInterceptsH2(t *testing.T) {
	p, sp := laneProxy(t, HostPolicy{Connect: ConnectMITM, Named: true}, nil, nil)
	ca, pool := testCA(t)
	p.SetCA(ca)
	front := httptest.NewServer(p)
	t.Cleanup(front.Close)
	u, _ := url.Parse(front.URL)
	tr := &http.Transport{Proxy: http.ProxyURL(u), ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Post("https://"+laneHost+"/hook", "application/json", strings.NewReader(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || resp.ProtoMajor != 2 {
		t.Fatalf("a webhook over h2 in a CONNECT tunnel: %s %s, want 202 over HTTP/2", resp.Proto, resp.Status)
	}
	if n := len(queued(t, sp)); n != 1 {
		t.Errorf("%d queued, want 1", n)
	}
}

// A client that speaks first in neither TLS nor HTTP/1.1 (SSH, a line
// protocol) through a CONNECT is spliced to its target, under connect:
// tunnel as to a host hookpace would intercept, as it is captured.
func TestConnectSplicesOtherBytes(t *testing.T) {
	for name, hp := range map[string]HostPolicy{"tunnel": {Connect: ConnectTunnel}, "mitm": {Connect: ConnectMITM}} {
		t.Run(name, func(t *testing.T) {
			p, _ := laneProxy(t, hp, nil, nil)
			ca, _ := testCA(t)
			p.SetCA(ca)
			front := httptest.NewServer(p)
			t.Cleanup(front.Close)
			dst := echoServer(t)
			target := net.JoinHostPort("localhost", strconv.Itoa(int(dst.Port())))
			conn := connectRaw(t, front.Listener.Addr().String(), target)
			br := bufio.NewReader(conn)
			io.WriteString(conn, "SSH-2.0-OpenSSH_9.6\r\n")
			if line, err := br.ReadString('\n'); line != "SSH-2.0-OpenSSH_9.6\r\n" {
				t.Fatalf("the client's first line through the tunnel: %q, %v; want it echoed by the target", line, err)
			}
			// A reload that makes the host intercepted leaves it open: such
			// bytes are never served in the middle.
			pol := *p.policy.Load()
			pol.Host = func(string) HostPolicy { return HostPolicy{Connect: ConnectMITM} }
			p.SetPolicy(pol)
			io.WriteString(conn, "QUIT\r\n")
			if line, err := br.ReadString('\n'); line != "QUIT\r\n" {
				t.Fatalf("the tunnel after a reload: %q, %v; want the echo", line, err)
			}
		})
	}
}

// A client gone before its CONNECT is answered leaves no connection to
// the target open: the one dialled for the tunnel is closed.
func TestConnectAnswerFailsClosesUp(t *testing.T) {
	p, _ := laneProxy(t, HostPolicy{Connect: ConnectTunnel}, nil, nil)
	client, hijacked := net.Pipe()
	client.Close() // the client is gone: the 200 cannot be written
	up, far := net.Pipe()
	defer far.Close()
	req := httptest.NewRequest(http.MethodConnect, "http://example.com:443", nil)
	p.serveTunnel(&tunnel{req: req, target: "example.com:443", host: "example.com", up: up, why: "connect: tunnel"}, hijacked)
	far.SetReadDeadline(time.Now()) // the read below never waits
	if _, err := far.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the target's side after the answer failed: %v, want EOF (closed)", err)
	}
}

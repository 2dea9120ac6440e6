package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookpace/hookpace/egress"
	"github.com/hookpace/hookpace/spool"
)

func TestRequestLine(t *testing.T) {
	for _, tc := range []struct {
		in              string
		isHTTP, decided bool
	}{
		{"GET / HTTP/1.1\r\n", true, true},
		{"POST /hooks", true, true},
		{"OPTIONS * HTTP/1.1", true, true},
		{"GET http://x/ HTTP/1.1", true, true},
		{"POS", false, false},
		{"POST ", false, false},
		{"PRI * HTTP/2.0\r\n", false, true},
		{"PING\r\n", false, true},
		{"\x00\x01\x02", false, true},
		{"get / HTTP/1.1", false, true},
		{"ABCDEFGHIJKLMNOPQRSTUVWXYZ /", false, true},
		{" GET /", false, true},
	} {
		isHTTP, decided := requestLine([]byte(tc.in))
		if isHTTP != tc.isHTTP || decided != tc.decided {
			t.Errorf("requestLine(%q) = %v, %v; want %v, %v", tc.in, isHTTP, decided, tc.isHTTP, tc.decided)
		}
	}
}

// echoServer echoes every connection's bytes back on a loopback port.
func echoServer(t *testing.T) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().(*net.TCPAddr).AddrPort()
}

// echoed sends b over a connection to addr, half-closes it and reads all.
func echoed(t *testing.T, addr string, b []byte) []byte {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// A captured connection to an address hookpace never delivers to
// (loopback under the default egress rules) is spliced before a byte is
// read: an HTTP POST comes back from the echo server as it was sent,
// nothing is spooled, and the splice is listed with its reason.
func TestCaptureSplicesInternal(t *testing.T) {
	sp, err := openJournaled(spool.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	g, err := egress.New(egress.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pol := Policy{Host: func(string) HostPolicy { return HostPolicy{Connect: ConnectMITM} }, MaxBody: 1 << 20, Methods: []string{"POST"}}
	p := New(Options{Policy: pol, Spool: sp, Guard: g, Transport: &http.Transport{}, Logger: slog.New(slog.DiscardHandler)})
	echo := echoServer(t)
	addr, done := captureListenerDone(t, p, func(netip.AddrPort) netip.AddrPort { return echo })
	msg := []byte("POST /hooks HTTP/1.1\r\nHost: billing.corp.test\r\nContent-Length: 2\r\n\r\n{}")
	if got := echoed(t, addr, msg); !bytes.Equal(got, msg) {
		t.Fatalf("spliced: got %q, want the bytes sent", got)
	}
	<-done
	if ms, _ := sp.Queued("billing.corp.test", 10); len(ms) != 0 {
		t.Errorf("spooled %d", len(ms))
	}
	ts := p.Tunnels()
	if len(ts) != 1 || ts[0].Host != echo.String() || ts[0].Mode != TunnelPassthrough || !strings.Contains(ts[0].Reason, "is loopback") {
		t.Errorf("tunnels %+v: want %s passed through as loopback", ts, echo)
	}
}

// Bytes that are neither TLS nor HTTP/1.1 (a binary protocol, the HTTP/2
// preface) are spliced to the original destination with the bytes read
// to decide.
func TestCaptureSplicesOtherBytes(t *testing.T) {
	p, sp := laneProxy(t, HostPolicy{}, nil, nil)
	echo := echoServer(t)
	addr := captureListener(t, p, func(netip.AddrPort) netip.AddrPort { return echo })
	for _, msg := range []string{"\x00\x01binary\xff", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "PING\r\n"} {
		if got := echoed(t, addr, []byte(msg)); string(got) != msg {
			t.Errorf("spliced %q: got %q", msg, got)
		}
	}
	if n := len(queued(t, sp)); n != 0 {
		t.Errorf("spooled %d", n)
	}
}

// One of hookpace's own connections captured back to it is refused with
// 508 Loop Detected: nothing is spooled, the refusal is counted, and the
// cause is logged once.
func TestCaptureRefusesLoop(t *testing.T) {
	var log bytes.Buffer
	p, sp := laneProxy(t, HostPolicy{}, nil, &log)
	addr := captureListener(t, p, func(netip.AddrPort) netip.AddrPort { return netip.MustParseAddrPort(laneHost) })
	dial := OwnDial((&net.Dialer{}).DialContext)
	for range 2 {
		c, err := dial(context.Background(), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		resp := postOver(t, c, "http://"+laneHost+"/hook", laneHost)
		c.Close()
		if resp.StatusCode != http.StatusLoopDetected {
			t.Fatalf("hookpace's own POST captured back: %s, want 508", resp.Status)
		}
	}
	if n := len(queued(t, sp)); n != 0 {
		t.Errorf("spooled %d of hookpace's own", n)
	}
	if p.Loops() != 2 || strings.Count(log.String(), "capture: loop:") != 1 || !strings.Contains(log.String(), "--exclude-uid") {
		t.Errorf("%d loops, log:\n%s", p.Loops(), log.String())
	}
	// An app's connection is served as before.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if resp := postOver(t, c, "http://"+laneHost+"/hook", laneHost); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the app's POST: %s", resp.Status)
	}
}

// peekCases are the connections hookpace cannot serve in the middle: a
// server that asks for a client certificate, or refuses HTTP/1.1, and a
// client that offers h2 alone.
var peekCases = []struct {
	name   string
	server func(*tls.Config)
	client []string // ALPN
	reason string
}{
	{"client certificate", func(c *tls.Config) { c.ClientAuth = tls.RequestClientCert }, nil, SpliceClientCert},
	{"server ALPN", func(c *tls.Config) { c.NextProtos = []string{"acme-tls/1"} }, []string{"acme-tls/1", "http/1.1"}, SpliceALPN},
	{"client h2 only", func(c *tls.Config) { c.NextProtos = []string{"h2", "http/1.1"} }, []string{"h2"}, SpliceALPN},
}

// peekSetup starts a TLS server set up by server that answers "direct",
// and a proxy that would intercept every host with a CA of its own.
func peekSetup(t *testing.T, server func(*tls.Config)) (*httptest.Server, *Proxy, *spool.Spool) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "direct") }))
	srv.TLS = &tls.Config{}
	server(srv.TLS)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p, sp := laneProxy(t, HostPolicy{Connect: ConnectMITM}, nil, nil)
	ca, _ := testCA(t)
	p.SetCA(ca)
	return srv, p, sp
}

// checkSpliced checks that conn reaches srv itself: its certificate, and
// (when srv speaks HTTP/1.1) its answer; that nothing was spooled for
// host, and that p counts host passed through.
func checkSpliced(t *testing.T, conn *tls.Conn, srv *httptest.Server, p *Proxy, sp *spool.Spool, host, reason string) {
	t.Helper()
	if issuer := conn.ConnectionState().PeerCertificates[0].Issuer.CommonName; strings.Contains(issuer, "hookpace") {
		t.Fatalf("answered by hookpace's leaf (issuer %q), want the server's own", issuer)
	}
	if srv.TLS.NextProtos == nil {
		req, _ := http.NewRequest(http.MethodPost, "https://"+host+"/hook", strings.NewReader("{}"))
		req.Write(conn)
		resp, err := http.ReadResponse(bufio.NewReader(conn), req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != "direct" {
			t.Errorf("answer %q, want the server's own", b)
		}
	}
	if ms, _ := sp.Queued(host, 10); len(ms) != 0 {
		t.Errorf("spooled %d", len(ms))
	}
	var found bool
	for _, s := range p.Tunnels() {
		found = found || s.Mode == TunnelPassthrough && s.Host == host
	}
	if !found {
		t.Errorf("tunnels %+v: want %s passed through (%s)", p.Tunnels(), host, reason)
	}
}

// What hookpace cannot serve in the middle is spliced: the client's
// handshake reaches the server, which answers with its own certificate.
func TestCapturePeeksBeforeIntercepting(t *testing.T) {
	for _, tc := range peekCases {
		t.Run(tc.name, func(t *testing.T) {
			srv, p, sp := peekSetup(t, tc.server)
			dst := srv.Listener.Addr().(*net.TCPAddr).AddrPort()
			addr := captureListener(t, p, func(netip.AddrPort) netip.AddrPort { return dst })
			conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "api.example", InsecureSkipVerify: true, NextProtos: tc.client})
			if err != nil {
				t.Fatalf("handshake: %v", err)
			}
			defer conn.Close()
			checkSpliced(t, conn, srv, p, sp, net.JoinHostPort("api.example", strconv.Itoa(int(dst.Port()))), tc.reason)
		})
	}
}

// An app that offers h2 and HTTP/1.1 on an intercepted captured
// connection speaks h2 with hookpace: its webhook is spooled and answered
// 202, a body over the limit gets 413.
func TestServeCaptureH2(t *testing.T) {
	var log bytes.Buffer
	p, sp := laneProxy(t, HostPolicy{Connect: ConnectMITM, Named: true}, nil, &log)
	ca, pool := testCA(t)
	p.SetCA(ca)
	addr, done := captureListenerDone(t, p, func(netip.AddrPort) netip.AddrPort { return netip.MustParseAddrPort("127.0.0.1:9") })
	tr := &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	resp, err := c.Post("https://localhost:9/hook", "application/json", strings.NewReader(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusAccepted || resp.Header.Get("X-Hookpace-Id") == "" {
		t.Fatalf("captured webhook: %s %s, id %q\n%s", resp.Proto, resp.Status, resp.Header.Get("X-Hookpace-Id"), log.String())
	}
	if ms, err := sp.Queued("localhost:9", 10); err != nil || len(ms) != 1 || ms[0].URL != "https://localhost:9/hook" {
		t.Fatalf("spooled for localhost:9: %v %v", ms, err)
	}
	resp, err = c.Post("https://localhost:9/hook", "application/json", strings.NewReader(strings.Repeat("x", 2<<20)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("an oversized webhook over h2: %s, want 413", resp.Status)
	}
	// One h2 connection carried both; the app closes it, and its
	// ServeCapture returns.
	tr.CloseIdleConnections()
	<-done
}

// A probe's verdict is remembered per name and address for probeTTL: the
// server sees one probe handshake for many connections, and a new one
// once the verdict is older; a name is probed on its own.
func TestProbeVerdictRemembered(t *testing.T) {
	var handshakes atomic.Int64
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			handshakes.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	dst := srv.Listener.Addr().String()
	var ps probes
	now := time.Now()
	for range 3 {
		if v := ps.get(context.Background(), dst, "api.example", directDial, now); v.label != SpliceClientCert {
			t.Fatalf("verdict %+v, want %s", v, SpliceClientCert)
		}
	}
	ps.get(context.Background(), dst, "other.example", directDial, now)
	if n := handshakes.Load(); n != 2 {
		t.Fatalf("%d probes for two names, want 2", n)
	}
	ps.get(context.Background(), dst, "api.example", directDial, now.Add(probeTTL+time.Second))
	if n := handshakes.Load(); n != 3 {
		t.Errorf("%d probes after the verdict expired, want 3", n)
	}
}

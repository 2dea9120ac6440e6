package proxy

// Plain HTTP inside a CONNECT tunnel. Some clients tunnel even to an
// http:// URL (undici's ProxyAgent and EnvHttpProxyAgent, and so Node's
// fetch pointed at a proxy; Java and Go clients set up to always tunnel).
// hookpace answers such a CONNECT with 200 and looks at the first bytes
// the client sends: a TLS handshake keeps the host's connect policy; an
// HTTP/1.1 request line is served like absolute-form requests: POSTs are
// spooled and paced with the same egress check, auth and bounds, other
// methods pass through. No CA is involved. Other bytes are spliced to the
// target, unless the host's policy is connect: deny.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/elazarl/goproxy"

	"github.com/hookpace/hookpace/mitm"
)

// tlsHandshake is the first byte of a TLS record carrying a ClientHello.
const tlsHandshake = 0x16

// sniffTimeout bounds the wait for a tunnel's first bytes, as
// ReadHeaderTimeout bounds the wait for a request's header.
const sniffTimeout = 30 * time.Second

// opaqueAfter is how long a tunnel under connect: tunnel, or a captured
// connection, waits for either side's first bytes before it splices the
// connection through as it is. A server that speaks first (SMTP, say)
// decides sooner (awaitOpening).
const opaqueAfter = 5 * time.Second

// tunnel is an accepted CONNECT whose first bytes decide what it is.
type tunnel struct {
	req    *http.Request // the CONNECT
	target string        // host:port, as the CONNECT asked
	host   string        // the host key the connect policy was taken for
	// deny, when set, refuses a TLS tunnel with this reason; else a TLS
	// tunnel is spliced through to target (connect: tunnel).
	deny string
	// ca, when set, intercepts a TLS tunnel: hookpace answers the
	// handshake with a leaf for the target and serves HTTPS inside.
	ca    *mitm.CA
	why   string // why a TLS tunnel passes through (the tunnel's reason)
	start time.Time
	// captured: the kernel redirected this connection to the capture
	// listener; there was no CONNECT and no proxy credentials, and the
	// redirect is its authorization (capture.go).
	captured bool
	// up is the connection to target dialled before the CONNECT was
	// answered (openTunnel); the splice takes it, anything else closes it.
	up net.Conn
	// label, when set, is the Splice* reason a tunnel hookpace would
	// intercept is spliced for: what the client or the server speaks
	// (cannotIntercept, or a server that speaks first), which no reload
	// changes.
	label string
	// greeting is what the server said before the client spoke, for the
	// splice to pass on first.
	greeting []byte
	// opaque: its server spoke first, or its client in neither TLS nor
	// HTTP/1.1, which hookpace serves in the middle under no policy.
	opaque bool
}

// dropUp closes the connection to target dialled before the tunnel's
// first bytes, once no splice will use it.
func (t *tunnel) dropUp() {
	if t.up != nil {
		t.up.Close()
		t.up = nil
	}
}

// sniffConnect accepts the CONNECT and hands its connection to t.serve.
func (p *Proxy) sniffConnect(t *tunnel) *goproxy.ConnectAction {
	return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: func(_ *http.Request, conn net.Conn, _ *goproxy.ProxyCtx) {
		p.serveTunnel(t, conn)
	}}
}

func (p *Proxy) serveTunnel(t *tunnel, conn net.Conn) {
	var pre []byte
	if ec, ok := conn.(*earlyConn); ok {
		conn, pre = ec.Conn, ec.early
	}
	r := t.req
	major, minor := r.ProtoMajor, r.ProtoMinor
	if major == 0 {
		major, minor = 1, 1
	}
	if _, err := fmt.Fprintf(conn, "HTTP/%d.%d 200 Connection established\r\n\r\n", major, minor); err != nil {
		t.dropUp()
		conn.Close()
		return
	}
	p.serveSniffed(t, conn, pre)
}

// earlyWriter hands goproxy a CONNECT's connection together with what
// the client sent after the request without waiting for the answer (a
// ClientHello in the CONNECT's own write): net/http has read those bytes
// into its buffer, and the tunnel must see them first.
type earlyWriter struct {
	http.ResponseWriter
	hj http.Hijacker
}

func (w earlyWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := w.hj.Hijack()
	if err != nil || brw.Reader.Buffered() == 0 {
		return conn, brw, err
	}
	early, _ := brw.Reader.Peek(brw.Reader.Buffered())
	return &earlyConn{Conn: conn, early: bytes.Clone(early)}, brw, nil
}

// earlyConn is a hijacked CONNECT's connection and the bytes the client
// sent early, to be read before it.
type earlyConn struct {
	net.Conn
	early []byte
}

// serveSniffed serves a tunnel whose destination is decided: a CONNECT
// answered 200, or a captured connection (capture.go). pre are bytes
// already read from conn (a captured ClientHello), read again first.
// Its first bytes say what it is: TLS is intercepted, spliced through or
// refused as t says; an HTTP/1.1 request line is served; anything else is
// spliced through, or served as HTTP/1.1 under connect: deny.
func (p *Proxy) serveSniffed(t *tunnel, conn net.Conn, pre []byte) {
	r := t.req
	defer t.dropUp()
	wait := sniffTimeout
	if t.deny == "" && t.ca == nil {
		wait = opaqueAfter
	}
	if len(pre) == 0 && t.deny == "" {
		o := awaitOpening(conn, t.up, time.Now().Add(wait), func(ctx context.Context) (net.Conn, error) {
			return p.opts.Guard.DialContext(ctx, "tcp", t.target)
		})
		t.up, pre = o.up, o.client
		switch {
		case o.serverFirst() && (t.ca == nil || len(o.greeting) > 0):
			// Neither HTTP nor TLS: a protocol where the server speaks first.
			if t.ca != nil {
				t.label, t.why = SpliceNotHTTP, "the server spoke first (neither TLS nor HTTP): passed through as without hookpace"
			}
			t.greeting, t.opaque = o.greeting, len(o.greeting) > 0
			p.splice(t, &peekedConn{Conn: conn, r: newReplayReader(pre, conn)})
			return
		case len(pre) == 0:
			p.log.Debug("connect: tunnel closed before its first bytes", "host", t.host, "remote", r.RemoteAddr, "error", o.err)
			conn.Close()
			return
		}
	}
	br := newReplayReader(pre, conn)
	c := &peekedConn{Conn: conn, r: br}
	conn.SetReadDeadline(time.Now().Add(wait))
	first, err := br.Peek(1)
	conn.SetReadDeadline(time.Time{})
	if err != nil {
		p.log.Debug("connect: tunnel closed before its first bytes", "host", t.host, "remote", r.RemoteAddr, "error", err)
		conn.Close()
		return
	}
	if first[0] != tlsHandshake && t.deny == "" && !httpInside(conn, br, wait) {
		t.opaque = true
		if t.ca != nil {
			t.label, t.why = SpliceNotHTTP, "neither TLS nor HTTP/1.1: passed through as without hookpace"
		}
		p.splice(t, c)
		return
	}
	switch {
	case first[0] != tlsHandshake:
		t.dropUp()
		p.log.Debug("connect", "decision", "plain http", "host", t.host, "remote", r.RemoteAddr)
		if t.ca != nil && !t.captured {
			p.countTunnel(r.Context(), t.host, TunnelIntercepted, "")
		}
		p.serveInside(t, c, "http")
	case t.ca != nil:
		if !t.captured {
			var ok bool
			if c, ok = p.peekTunnelHello(t, c); !ok {
				return
			}
			if t.label != "" {
				p.splice(t, c)
				return
			}
			p.countTunnel(r.Context(), t.host, TunnelIntercepted, "")
		}
		t.dropUp()
		p.log.Debug("connect", "decision", "mitm", "host", t.host, "remote", r.RemoteAddr)
		cfg, err := t.ca.TLSConfig(t.target)
		if err != nil {
			p.log.Warn("connect: no certificate for the tunnel", "host", t.host, "error", err)
			c.Close()
			return
		}
		// The app expects what its partner offers: h2 too.
		cfg = cfg.Clone()
		cfg.NextProtos = []string{"h2", "http/1.1"}
		ac := &alertConn{Conn: c}
		tc := tls.Server(ac, cfg)
		if !p.handshake(t, tc, ac) {
			return
		}
		if tc.ConnectionState().NegotiatedProtocol == "h2" {
			p.serveInsideH2(t, tc)
			return
		}
		p.serveInside(t, tc, "https")
	case t.deny != "":
		p.countTunnel(r.Context(), t.host, TunnelRefused, "connect: deny")
		p.record(r, t.start, t.host, 0, decision{outcome: outcomeRefused, status: http.StatusForbidden, reason: t.deny})
		// The client is in TLS now: say no in TLS (a fatal access_denied
		// alert) rather than with an HTTP answer it would not read.
		conn.Write([]byte{21, 3, 3, 0, 2, 2, 49})
		conn.Close()
	default:
		p.splice(t, c)
	}
}

// httpInside reports whether a tunnel's first bytes, read ahead into br
// from conn, start an HTTP/1.1 request line (requestLine). Bytes that do
// not decide it within wait, or before the client stops, are not one.
func httpInside(conn net.Conn, br *bufio.Reader, wait time.Duration) bool {
	conn.SetReadDeadline(time.Now().Add(wait))
	defer conn.SetReadDeadline(time.Time{})
	for n := 1; ; n++ {
		b, err := br.Peek(n)
		if isHTTP, decided := requestLine(b); decided {
			return isHTTP
		}
		if err != nil {
			return false
		}
	}
}

// peekTunnelHello reads the ClientHello of a CONNECT tunnel hookpace
// would intercept, without answering it, and sets t.label and t.why when
// it must be spliced instead (cannotIntercept: the probe reaches target
// through the egress guard, as the splice would). The connection it
// returns reads the ClientHello again first. A tunnel whose ClientHello
// can't be read is closed (ok false).
func (p *Proxy) peekTunnelHello(t *tunnel, c *peekedConn) (_ *peekedConn, ok bool) {
	var seen bytes.Buffer
	c.Conn.SetReadDeadline(time.Now().Add(sniffTimeout))
	hello, err := readClientHello(io.TeeReader(c.r, &seen))
	c.Conn.SetReadDeadline(time.Time{})
	if err != nil {
		p.record(t.req, t.start, t.host, 0, badRequest("connect: TLS without a readable ClientHello: "+err.Error()))
		c.Close()
		return nil, false
	}
	hp := p.policy.Load().Host(t.host)
	t.label, t.why = p.cannotIntercept(t.req.Context(), hello, hp, t.target, hostOnly(t.target), p.opts.Guard.DialContext)
	return &peekedConn{Conn: c.Conn, r: bufio.NewReader(io.MultiReader(&seen, c.r))}, true
}

// rejections are the alerts a client sends when it does not trust the
// certificate it was given, by their description in an encrypted alert
// (crypto/tls's error) and their code in a plaintext one.
var rejections = map[string]bool{
	"tls: bad certificate": true, "tls: unsupported certificate": true,
	"tls: unknown certificate": true, "tls: unknown certificate authority": true,
}

var rejectionCodes = map[byte]string{
	42: "bad certificate", 43: "unsupported certificate", 46: "unknown certificate", 48: "unknown certificate authority",
}

// alertConn remembers the start of the last read during a handshake: a
// TLS 1.3 client that rejects the server's certificate (OpenSSL: curl,
// Python) says so in a plaintext alert, before it has keys to encrypt
// one, which crypto/tls reports only as "bad record MAC".
type alertConn struct {
	net.Conn
	last []byte
	done bool // the handshake is over: reads pass through
}

func (c *alertConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && !c.done {
		c.last = append(c.last[:0], b[:min(n, 64)]...)
	}
	return n, err
}

// CloseWrite half-closes the connection underneath.
func (c *alertConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// plainAlert is the description of a plaintext alert record in the last
// read, after any change_cipher_spec records.
func (c *alertConn) plainAlert() (byte, bool) {
	b := c.last
	for len(b) >= 5 && b[0] == 20 { // change_cipher_spec, sent for middleboxes
		b = b[min(len(b), 5+int(b[3])<<8|int(b[4])):]
	}
	if len(b) >= 7 && b[0] == 21 && b[3] == 0 && b[4] == 2 {
		return b[6], true
	}
	return 0, false
}

// handshake completes the intercepting handshake of tc, within
// sniffTimeout. A client that rejects hookpace's certificate is counted
// (TunnelRejected), warned of once per host and listed; it closes tc and
// reports false on any failure.
func (p *Proxy) handshake(t *tunnel, tc *tls.Conn, ac *alertConn) bool {
	ctx, cancel := context.WithTimeout(t.req.Context(), sniffTimeout)
	defer cancel()
	err := tc.HandshakeContext(ctx)
	ac.done = true
	if err == nil {
		return true
	}
	tc.Close()
	alert := ""
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "remote error" && rejections[oe.Err.Error()] {
		alert = strings.TrimPrefix(oe.Err.Error(), "tls: ")
	} else if code, ok := ac.plainAlert(); ok {
		alert = rejectionCodes[code]
	}
	if alert != "" {
		p.countTunnel(t.req.Context(), t.host, TunnelRejected, "the client does not trust hookpace's CA ("+alert+")")
		return false
	}
	p.log.Debug("connect: TLS handshake failed", "host", t.host, "remote", t.req.RemoteAddr, "error", err)
	return false
}

// serveInside serves HTTP/1.1 inside a tunnel: plain (its first bytes
// were not TLS) or intercepted (c is hookpace's side of the TLS). Each
// request is made absolute-form (scheme://target/path) and goes to
// ServeHTTP, exactly as if the client had sent it to the proxy without a
// tunnel. The tunnel was authorized at the CONNECT: its credentials go
// with each request, for authorize to check again (they are never stored
// nor forwarded: storedHeader and goproxy drop Proxy-* headers).
func (p *Proxy) serveInside(t *tunnel, c net.Conn, scheme string) {
	srv := innerServer(t.req, p.insideHandler(t, scheme))
	if srv.ErrorLog == nil {
		srv.ErrorLog = slog.NewLogLogger(p.log.Handler(), slog.LevelDebug)
	}
	serveOne(srv, c)
}

// serveInsideH2 serves HTTP/2 inside an intercepted captured connection
// (the app chose h2 in the handshake), each stream's request as
// serveInside serves one, under the same limits. net/http serves h2 on a
// *tls.Conn that negotiated it, so the listener hands out c itself and
// learns of its end from ConnState.
func (p *Proxy) serveInsideH2(t *tunnel, c *tls.Conn) {
	srv := innerServer(t.req, p.insideHandler(t, "https"))
	if srv.ErrorLog == nil {
		srv.ErrorLog = slog.NewLogLogger(p.log.Handler(), slog.LevelDebug)
	}
	l := &oneConnListener{conn: c, closed: make(chan struct{})}
	srv.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed || s == http.StateHijacked {
			l.Close()
		}
	}
	srv.Serve(l)
}

// insideHandler makes each request read inside tunnel t absolute-form
// and hands it to ServeHTTP.
func (p *Proxy) insideHandler(t *tunnel, scheme string) http.Handler {
	auth := t.req.Header.Get("Proxy-Authorization")
	return http.HandlerFunc(func(w http.ResponseWriter, in *http.Request) {
		if err := tunnelURL(in, t.target, scheme); err != nil {
			p.record(in, time.Now(), t.host, 0, badRequest(err.Error()))
			refuseFraming(w, err.Error()) // and close: the tunnel reaches one destination
			return
		}
		in.RemoteAddr = t.req.RemoteAddr
		if auth != "" && in.Header.Get("Proxy-Authorization") == "" {
			in.Header.Set("Proxy-Authorization", auth)
		}
		if t.captured {
			in = in.WithContext(context.WithValue(in.Context(), capturedKey{}, true))
		}
		p.ServeHTTP(w, in)
	})
}

// innerServer serves the requests inside a tunnel with the limits of the
// server that took the CONNECT (its timeouts and header size), so that a
// tunnel is held to what a direct request is; without one, 30 s for a
// header and 120 s idle.
func innerServer(connect *http.Request, h http.Handler) *http.Server {
	outer, ok := connect.Context().Value(http.ServerContextKey).(*http.Server)
	if !ok {
		return &http.Server{Handler: h, ReadHeaderTimeout: sniffTimeout, IdleTimeout: 120 * time.Second, ConnContext: TapContext}
	}
	return &http.Server{Handler: h, ReadHeaderTimeout: outer.ReadHeaderTimeout, ReadTimeout: outer.ReadTimeout,
		WriteTimeout: outer.WriteTimeout, IdleTimeout: outer.IdleTimeout, MaxHeaderBytes: outer.MaxHeaderBytes,
		ErrorLog: outer.ErrorLog, ConnContext: TapContext}
}

// serveOne serves the requests of one connection inside a tunnel (or
// captured) with srv, its raw first header block kept for the judge.
func serveOne(srv *http.Server, c net.Conn) {
	srv.Serve(newOneConnListener(newHeadTap(c)))
}

// tunnelURL makes a request read inside a tunnel to target absolute-form
// (scheme://target/path). Its Host must name the tunnel's target: a tunnel
// reaches one destination, whatever a request inside it says.
func tunnelURL(in *http.Request, target, scheme string) error {
	want := HostKey(&url.URL{Scheme: scheme, Host: target})
	if in.Host != "" {
		if got := HostKey(&url.URL{Scheme: scheme, Host: in.Host}); got != want {
			return fmt.Errorf("request for %s inside a tunnel to %s", got, want)
		}
	}
	if in.URL.IsAbs() {
		if got := HostKey(in.URL); got != want || in.URL.Scheme != scheme {
			return fmt.Errorf("request for %s inside a tunnel to %s", in.URL.Redacted(), want)
		}
		return nil
	}
	u, err := url.Parse(scheme + "://" + target + in.URL.RequestURI())
	if err != nil {
		return fmt.Errorf("request target: %w", err)
	}
	in.URL = u
	return nil
}

// newReplayReader reads pre, then conn.
func newReplayReader(pre []byte, conn net.Conn) *bufio.Reader {
	if len(pre) == 0 {
		return bufio.NewReader(conn)
	}
	return bufio.NewReader(io.MultiReader(bytes.NewReader(pre), conn))
}

// peekedConn is a connection whose first bytes were read ahead into r.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// CloseWrite half-closes the underlying TCP connection, when it is one.
func (c *peekedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// oneConnListener hands out one connection to http.Server.Serve, then
// blocks Accept until that connection is closed, so that Serve returns
// when the tunnel ends.
type oneConnListener struct {
	conn   net.Conn
	once   sync.Once
	taken  bool
	mu     sync.Mutex
	closed chan struct{}
}

func newOneConnListener(c net.Conn) *oneConnListener {
	l := &oneConnListener{closed: make(chan struct{})}
	l.conn = &notifyConn{Conn: c, closed: func() { l.once.Do(func() { close(l.closed) }) }}
	return l
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if !l.taken {
		l.taken = true
		l.mu.Unlock()
		return l.conn, nil
	}
	l.mu.Unlock()
	<-l.closed
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *oneConnListener) Addr() net.Addr { return l.conn.LocalAddr() }

// notifyConn calls closed when it is closed.
type notifyConn struct {
	net.Conn
	closed func()
}

func (c *notifyConn) Close() error {
	err := c.Conn.Close()
	c.closed()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

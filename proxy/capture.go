package proxy

// Capture: connections the kernel redirected to the capture listener
// (iptables REDIRECT; `hookpace capture rules`). There was no CONNECT and
// no proxy variable: the app dialled its partner, and dst is where it was
// going (SO_ORIGINAL_DST). hookpace sits in the path of all the app's
// traffic to the captured ports, so it intercepts only what can be a
// webhook and splices everything else to dst byte for byte (splice.go):
//
//   - A destination hookpace never delivers to (private, loopback,
//     link-local, unique-local, egress.deny): spliced before any byte is
//     read.
//   - TLS: the ClientHello's server name (SNI) is read without answering
//     it. A name the host's policy intercepts, whose server and client
//     hookpace can serve in the middle (peek.go), is intercepted as a
//     CONNECT to name:port would be (serveSniffed, with the ClientHello
//     read again; h2 is offered besides HTTP/1.1), with the same
//     counters, lines and status page; deny
//     refuses; anything else is spliced. Without SNI the destination
//     address stands for the name.
//   - HTTP/1.1 (a request line): each request is served as proxy-form to
//     its Host name on dst's port (captureURL says why Host wins).
//   - Anything else, a server that speaks first (opening.go), or nothing
//     from either side for opaqueAfter: spliced.
//
// The redirect is the authorization: proxy credentials are neither asked
// for nor read (the capture listener is reachable only by the redirect,
// from the pod or the VM itself).

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// capturedKey marks a request's context: it came through the capture
// listener, and authorize lets it in without proxy credentials.
type capturedKey struct{}

// errHelloRead stops the handshake that read a ClientHello: it is never
// answered.
var errHelloRead = errors.New("client hello read")

// ServeCapture serves one connection redirected to the capture listener;
// dst is where the app was connecting. ctx may carry http.ServerContextKey,
// the proxy listener's server, whose limits the requests inside are held
// to. served wraps the connections hookpace serves itself (not those it
// splices); nil leaves them as they are. It closes conn.
//
// Only what can be a webhook is intercepted; the rest is spliced to dst
// byte for byte, as if hookpace were not there, before anything is
// answered: a destination hookpace never delivers to (internal.go), bytes
// that are neither TLS nor HTTP/1.1, TLS to a name not intercepted, and
// TLS that hookpace cannot serve in the middle (peek.go). hookpace's own
// connections, captured back, are refused (loop.go).
func (p *Proxy) ServeCapture(ctx context.Context, conn net.Conn, dst netip.AddrPort, served func(net.Conn) net.Conn) {
	start := time.Now()
	if served == nil {
		served = func(c net.Conn) net.Conn { return c }
	}
	dst = netip.AddrPortFrom(dst.Addr().Unmap().WithZone(""), dst.Port())
	req := (&http.Request{Method: http.MethodConnect, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, RemoteAddr: conn.RemoteAddr().String(), Host: dst.String(),
		URL: &url.URL{Host: dst.String()}}).WithContext(context.WithValue(ctx, capturedKey{}, true))
	self, _ := addrPort(conn.LocalAddr())
	if self == dst {
		// Not redirected: someone dialled the capture listener itself.
		// Serving it would make hookpace its own destination.
		p.record(req, start, dst.String(), 0, decision{outcome: outcomeRefused, status: http.StatusForbidden,
			reason: "capture: connection to the capture listener itself, not redirected to it: refused"})
		conn.Close()
		return
	}
	if src, ok := addrPort(conn.RemoteAddr()); ok && isOwn(src, dst, self) {
		p.refuseLoop(req, conn, dst, start)
		return
	}
	if why := p.internal(req.Context(), dst); why != "" {
		p.spliceCaptured(req, conn, &opening{}, dst, dst.String(), SpliceInternal, why, start)
		return
	}
	deadline := time.Now().Add(opaqueAfter)
	o := awaitOpening(conn, nil, deadline, func(ctx context.Context) (net.Conn, error) {
		return directDial(ctx, "tcp", dst.String())
	})
	defer o.close()
	if o.serverFirst() {
		why := "the client sent nothing for " + opaqueAfter.String() + " (a protocol where the server speaks first): spliced to the original destination as without hookpace"
		switch {
		case len(o.greeting) > 0:
			why = "the server spoke first (neither TLS nor HTTP): spliced to the original destination as without hookpace"
		case o.err != nil:
			why = "the client half-closed the connection before its first byte: spliced to the original destination as without hookpace"
		}
		p.spliceCaptured(req, conn, &o, dst, dst.String(), SpliceNotHTTP, why, start)
		return
	}
	conn.SetReadDeadline(deadline)
	kind, err := sniffCaptured(conn, &o)
	conn.SetReadDeadline(time.Time{})
	pre := o.client
	if src, ok := addrPort(conn.RemoteAddr()); ok && len(pre) > 0 && isOwn(src, dst, self) {
		// Known for certain now: hookpace's dials are recorded before
		// they send their first byte.
		p.refuseLoop(req, &prefixConn{peekedConn: &peekedConn{Conn: conn}, pre: pre}, dst, start)
		return
	}
	switch kind {
	case sniffClosed:
		p.log.Debug("capture: connection closed before its first bytes", "destination", dst.String(), "remote", req.RemoteAddr, "error", err)
		conn.Close()
	case sniffOther:
		p.spliceCaptured(req, conn, &o, dst, dst.String(), SpliceNotHTTP,
			"neither TLS nor HTTP/1.1: spliced to the original destination as without hookpace", start)
	case sniffHTTP:
		o.close()
		p.serveCapturedHTTP(req, served(conn), pre, dst)
	default:
		p.serveCapturedTLS(req, conn, &o, dst, start, served)
	}
}

// serveCapturedTLS decides a captured TLS connection by its ClientHello,
// read without answering it: the host's connect policy and what the
// server and the client can speak (cannotIntercept) say intercept,
// refuse or splice. Without SNI the destination address stands for the
// name.
func (p *Proxy) serveCapturedTLS(req *http.Request, conn net.Conn, o *opening, dst netip.AddrPort, start time.Time, served func(net.Conn) net.Conn) {
	var seen bytes.Buffer
	seen.Write(o.client)
	conn.SetReadDeadline(time.Now().Add(sniffTimeout))
	hello, err := readClientHello(io.MultiReader(bytes.NewReader(o.client), io.TeeReader(conn, &seen)))
	conn.SetReadDeadline(time.Time{})
	o.client = seen.Bytes()
	if err != nil {
		p.record(req, start, dst.String(), 0, badRequest("capture: TLS without a readable ClientHello: "+err.Error()))
		conn.Close()
		return
	}
	name := hello.ServerName
	if name == "" {
		name = dst.Addr().String() // no SNI: the address is the name
	}
	target := net.JoinHostPort(name, strconv.Itoa(int(dst.Port())))
	req.Host, req.URL.Host = target, target
	u := &url.URL{Scheme: "https", Host: target}
	if err := CheckTarget(u); err != nil {
		p.spliceCaptured(req, conn, o, dst, dst.String(), SpliceExcluded,
			"the server name is not one hookpace takes ("+err.Error()+"): spliced as without hookpace", start)
		return
	}
	host := HostKey(u)
	hp := p.policy.Load().Host(host)
	ca := p.ca.Load()
	switch {
	case hp.Connect == ConnectDeny:
		p.countTunnel(req.Context(), host, TunnelRefused, "connect: deny")
		p.record(req, start, host, 0, decision{outcome: outcomeRefused, status: http.StatusForbidden,
			reason: "capture: TLS to " + host + " denied (connect: deny)"})
		conn.Write([]byte{21, 3, 3, 0, 2, 2, 49}) // a fatal access_denied alert
		conn.Close()
	case hp.Connect == ConnectMITM && ca != nil && ca.Covers(u.Hostname()):
		if label, why := p.cannotIntercept(req.Context(), hello, hp, dst.String(), name, directDial); label != "" {
			p.spliceCaptured(req, conn, o, dst, host, label, why, start)
			return
		}
		o.close()
		p.countTunnel(req.Context(), host, TunnelIntercepted, "")
		p.serveSniffed(&tunnel{req: req, target: target, host: host, ca: ca, start: start, captured: true}, served(conn), o.client)
	default:
		why := "not intercepted (connect: tunnel): spliced as without hookpace; name it in hosts to spool and pace it"
		if hp.Connect == ConnectMITM {
			why = "no CA in force vouches for the name (an IP, a cluster name, mitm.exclude or outside the CA's names): spliced as without hookpace"
		}
		p.spliceCaptured(req, conn, o, dst, host, SpliceExcluded, why, start)
	}
}

// serveCapturedHTTP serves plain HTTP/1.1 redirected to the capture
// listener: each request goes to ServeHTTP as proxy-form to captureURL.
func (p *Proxy) serveCapturedHTTP(req *http.Request, conn net.Conn, pre []byte, dst netip.AddrPort) {
	h := http.HandlerFunc(func(w http.ResponseWriter, in *http.Request) {
		if err := captureURL(in, dst); err != nil {
			p.record(in, time.Now(), dst.String(), 0, badRequest(err.Error()))
			refuseFraming(w, err.Error())
			return
		}
		in.RemoteAddr = req.RemoteAddr
		p.ServeHTTP(w, in.WithContext(context.WithValue(in.Context(), capturedKey{}, true)))
	})
	srv := innerServer(req, h)
	if srv.ErrorLog == nil {
		srv.ErrorLog = slog.NewLogLogger(p.log.Handler(), slog.LevelDebug)
	}
	serveOne(srv, &prefixConn{peekedConn: &peekedConn{Conn: conn}, pre: pre})
}

// prefixConn is a connection with pre, the bytes read to tell HTTP from
// TLS, read again before it. Past pre, reads go straight to the
// connection: http.Server buffers its own, a second buffer would copy
// every byte twice.
type prefixConn struct {
	*peekedConn // its CloseWrite
	pre         []byte
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(b, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	return c.peekedConn.Conn.Read(b)
}

// captureURL makes a captured plain-HTTP request proxy-form:
// http://name:port/path, the port always the one the app dialled (dst's:
// that is the port the rules captured). The name is Host's when Host
// names a host: the app resolved that name to dial dst, the hosts
// settings, pacing and egress rules are keyed by name, a partner behind a
// shared address needs it, and delivery resolves it again under the egress
// rules. The address dialled wins when Host is missing or is an address
// other than dst's: an address in Host names nothing more than the one
// the kernel saw, and that one is a fact.
func captureURL(in *http.Request, dst netip.AddrPort) error {
	host := in.Host
	if in.URL.IsAbs() {
		host = in.URL.Host
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	if strings.HasPrefix(name, "[") && strings.HasSuffix(name, "]") {
		name = name[1 : len(name)-1] // an IPv6 Host without a port
	}
	if a, err := netip.ParseAddr(name); name == "" || (err == nil && a.Unmap() != dst.Addr()) {
		name = dst.Addr().String()
	}
	// The request target's path and query as the server parsed them,
	// under the new scheme and authority.
	u := *in.URL
	if u.Opaque != "" || u.Path != "" && u.Path[0] != '/' {
		return fmt.Errorf("capture: request target %q is not a path", in.RequestURI)
	}
	u.Scheme, u.User, u.Host = "http", nil, net.JoinHostPort(name, strconv.Itoa(int(dst.Port())))
	if err := CheckTarget(&u); err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	in.URL = &u
	return nil
}

// readClientHello reads a TLS ClientHello from r and answers nothing.
func readClientHello(r io.Reader) (*tls.ClientHelloInfo, error) {
	var hello *tls.ClientHelloInfo
	err := tls.Server(readOnlyConn{r: r}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			c := *h
			c.Conn = nil
			hello = &c
			return nil, errHelloRead
		},
	}).Handshake()
	if hello == nil {
		if err == nil {
			err = errors.New("no ClientHello")
		}
		return nil, err
	}
	return hello, nil
}

// readOnlyConn lets crypto/tls read a ClientHello and write nothing.
type readOnlyConn struct{ r io.Reader }

func (c readOnlyConn) Read(b []byte) (int, error)     { return c.r.Read(b) }
func (readOnlyConn) Write([]byte) (int, error)        { return 0, io.ErrClosedPipe }
func (readOnlyConn) Close() error                     { return nil }
func (readOnlyConn) LocalAddr() net.Addr              { return nil }
func (readOnlyConn) RemoteAddr() net.Addr             { return nil }
func (readOnlyConn) SetDeadline(time.Time) error      { return nil }
func (readOnlyConn) SetReadDeadline(time.Time) error  { return nil }
func (readOnlyConn) SetWriteDeadline(time.Time) error { return nil }

// addrPort is a TCP address as a netip.AddrPort, unmapped and without zone.
func addrPort(a net.Addr) (netip.AddrPort, bool) {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}, false
	}
	ap := ta.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port()), true
}

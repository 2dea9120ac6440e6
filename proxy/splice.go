package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/hookpace/hookpace/egress"
)

// Splice labels: why a captured connection was spliced to its original
// destination, as the reason label of hookpace_tunnels_total.
const (
	// SpliceInternal: a destination hookpace never delivers to.
	SpliceInternal = "internal"
	// SpliceExcluded: TLS to a name hookpace does not intercept.
	SpliceExcluded = "excluded"
	// SpliceNotHTTP: bytes that are neither TLS nor HTTP/1.1.
	SpliceNotHTTP = "not-http"
	// SpliceClientCert: the server asks for a client certificate.
	SpliceClientCert = "client-certificate"
	// SpliceALPN: the server refuses HTTP/1.1, or the client offers none.
	SpliceALPN = "alpn"
)

// spliceDialTimeout bounds the dial of a splice's original destination.
const spliceDialTimeout = 10 * time.Second

// directDial dials a captured connection's original destination: the
// app could reach it without hookpace, so no egress rule is asked. Its
// connections are hookpace's own from before they connect (bindOwn), so
// that a splice captured back to hookpace is never spliced again.
var directDial = ownPortDial((&net.Dialer{Timeout: spliceDialTimeout, KeepAlive: 30 * time.Second, ControlContext: bindOwn}).DialContext)

// internal says why dst is a destination hookpace never delivers to (the
// egress guard refuses it: private, loopback, link-local, unique-local,
// cloud metadata, egress.deny), or "" when a webhook may go there. Such a
// connection is the app's own business: it is spliced, never refused.
func (p *Proxy) internal(ctx context.Context, dst netip.AddrPort) string {
	_, err := p.opts.Guard.CheckPort(ctx, dst.Addr().String(), dst.Port())
	var de *egress.DeniedError
	if !errors.As(err, &de) {
		return ""
	}
	return "the original destination " + de.Addr.String() + " is " + de.Reason +
		": hookpace never delivers there, so the app's own connection is spliced as without hookpace"
}

// sniff kinds: what a captured connection's first bytes are.
type sniffKind int

const (
	sniffClosed sniffKind = iota // closed or failed before deciding
	sniffTLS
	sniffHTTP
	sniffOther // neither, or nothing before the deadline
)

// maxMethod bounds the request method a captured connection's first bytes
// are read for.
const maxMethod = 24

// sniffCaptured reads a captured connection's first bytes, after those
// o holds, until they say TLS (a handshake record), HTTP/1.1 (a request
// line's method and target) or neither; a read deadline that passes
// first says neither. What it read is added to o.client, to be replayed.
func sniffCaptured(conn net.Conn, o *opening) (sniffKind, error) {
	buf := append(make([]byte, 0, 512), o.client...)
	defer func() { o.client = buf }()
	for {
		if len(buf) > 0 {
			if buf[0] == tlsHandshake {
				return sniffTLS, nil
			}
			if isHTTP, decided := requestLine(buf); decided {
				if isHTTP {
					return sniffHTTP, nil
				}
				return sniffOther, nil
			}
		}
		if len(buf) == cap(buf) {
			return sniffOther, nil
		}
		n, err := conn.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil && n == 0 {
			if timedOut(err) {
				return sniffOther, nil
			}
			return sniffClosed, err
		}
	}
}

// requestLine says whether b starts like an HTTP/1.1 request line (a
// method token of capital letters, a space, then an origin-form,
// absolute-form or asterisk target), once b says enough to decide. The
// HTTP/2 preface (PRI *) is not: hookpace serves HTTP/1.1 only.
func requestLine(b []byte) (isHTTP, decided bool) {
	for i, c := range b {
		switch {
		case c >= 'A' && c <= 'Z' || c == '-' || c == '_':
			if i >= maxMethod {
				return false, true
			}
		case c == ' ' && i > 0:
			if string(b[:i]) == "PRI" {
				return false, true
			}
			if len(b) == i+1 {
				return false, false
			}
			t := b[i+1]
			return t == '/' || t == '*' || t == 'h' || t == 'H', true
		default:
			return false, true
		}
	}
	return false, false
}

// spliceCaptured passes a captured connection through to its original
// destination dst (o.up when it was dialled already), what o read to
// decide first in each direction, and counts it under host with label
// and why.
func (p *Proxy) spliceCaptured(req *http.Request, conn net.Conn, o *opening, dst netip.AddrPort, host, label, why string, start time.Time) {
	defer conn.Close()
	up, err := o.take(), error(nil)
	if up == nil {
		ctx, cancel := context.WithTimeout(req.Context(), spliceDialTimeout)
		up, err = directDial(ctx, "tcp", dst.String())
		cancel()
	}
	if err == nil && len(o.client) > 0 {
		if _, err = up.Write(o.client); err != nil {
			up.Close()
		}
	}
	if err == nil && len(o.greeting) > 0 {
		if _, err = conn.Write(o.greeting); err != nil {
			up.Close()
		}
	}
	if err != nil {
		p.record(req, start, host, 0, decision{outcome: outcomeError, status: http.StatusServiceUnavailable,
			reason: "capture: cannot reach the original destination " + dst.String() + " to splice it: " + err.Error()})
		return
	}
	defer up.Close()
	p.countSplice(req.Context(), host, label, why)
	p.record(req, start, host, 0, decision{outcome: outcomePassthrough, label: "splice", status: http.StatusOK,
		reason: "capture: spliced to " + dst.String() + " (" + why + ")"})
	done := make(chan struct{})
	go func() {
		defer close(done)
		pipe(rawTCP(up), conn)
	}()
	pipe(conn, rawTCP(up))
	<-done
}

// rawTCP is the *net.TCPConn inside one of hookpace's own connections,
// so that io.Copy between two TCP connections can splice in the kernel.
func rawTCP(c net.Conn) net.Conn {
	if oc, ok := c.(*ownConn); ok {
		return oc.TCPConn
	}
	return c
}

// countSplice records one captured connection spliced to host: the book
// (status page, hookpace status), the metric with its reason label and,
// the first time for host, a line saying why.
func (p *Proxy) countSplice(ctx context.Context, host, label, why string) {
	p.opts.Metrics.Tunnel(ctx, host, TunnelPassthrough, label)
	if p.tunnels.add(host, TunnelPassthrough, why, time.Now()) {
		p.log.Info("capture: spliced to the original destination as without hookpace: not a webhook hookpace can take", "host", host,
			"reason", label, "why", why)
	}
}

// splice passes a tunnel's bytes (TLS, or a protocol where the server
// speaks first) through to its target, unspooled and unthrottled (connect:
// tunnel). The guard dials only what it allows.
func (p *Proxy) splice(t *tunnel, c *peekedConn) {
	r := t.req
	defer c.Close()
	up, err := t.up, error(nil)
	t.up = nil
	if up == nil {
		up, err = p.opts.Guard.DialContext(context.Background(), "tcp", t.target)
	}
	if err != nil {
		// The CONNECT was answered 200 already: the client sees the
		// tunnel close; the line says what a request would have got.
		d, ok := refused(err)
		if !ok {
			d = decision{outcome: outcomeError, status: http.StatusServiceUnavailable,
				reason: "connect: tunnel closed: cannot reach " + t.target + ": " + err.Error()}
		}
		p.record(r, t.start, t.host, 0, d)
		return
	}
	defer up.Close()
	lt := &liveTunnel{host: t.host, name: hostOnly(t.target), client: c, up: up, pinned: t.label != "" || t.opaque}
	p.live.add(lt)
	defer p.live.remove(lt)
	// A reload between the CONNECT and now found no tunnel to close.
	if ca, pol := p.ca.Load(), p.policy.Load(); !lt.pinned && t.why != "" && ca != nil && pol.Host(t.host).Connect == ConnectMITM && ca.Covers(lt.name) {
		return
	}
	p.opts.Metrics.Tunnel(r.Context(), t.host, TunnelPassthrough, t.label)
	p.noteTunnel(t.host, TunnelPassthrough, t.why)
	p.record(r, t.start, t.host, 0, decision{outcome: outcomePassthrough, label: "tunnel", status: http.StatusOK,
		reason: "connect: tunnel passes bytes through unpaced (" + t.why + ")"})
	if len(t.greeting) > 0 {
		if _, err := c.Write(t.greeting); err != nil {
			return
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		pipe(up, c)
	}()
	pipe(c, up)
	<-done
}

// pipe copies src to dst, then half-closes dst; on an error it closes
// both, so that the other direction ends too.
func pipe(dst, src net.Conn) {
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		src.Close()
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	} else {
		dst.Close()
	}
}

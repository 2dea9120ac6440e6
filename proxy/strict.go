package proxy

// The door's one judge. Every door (the proxy listener, plain HTTP and
// the MITM inside a CONNECT tunnel, the capture listener, inbound routes)
// is a net/http server, and every request it reads meets judgeRequest
// before anything else looks at it: ServeHTTP for the first four,
// Strict for inbound routes. What it refuses, with 400 and the
// connection closed, is what RFC 9112 calls faulty framing or what could
// not be sent on as it came:
//
//   - Transfer-Encoding on an HTTP/1.0 request (RFC 9112 §6.1). net/http
//     drops the field without a word and reads the body by Content-Length,
//     or as empty without one: acked, the body would be lost or wrong.
//     The field is gone by the time a handler runs, so the door reads the
//     raw header block of the connection's first request (headTap), and
//     takes one HTTP/1.0 request per connection: later ones' header
//     blocks can't be told apart from the bytes before them without
//     framing them again (a second parser).
//   - A header name that folds to a framing field without being it
//     (spool.FoldsToFraming: Transfer_Encoding, Content__Length, T-E...).
//     Refused rather than dropped: no client sends one by mistake, a
//     receiver behind CGI, WSGI or Rack would read it as the field itself
//     (two framings), and a refusal tells the sender what a silent drop
//     would hide (the request delivered would differ from the one sent).
//   - A request target holding '#' (RFC 9112 §3.2 has no fragment in a
//     request target; no client sends one on, so it could not be
//     delivered as it came), a '%' not followed by two hex digits, or a
//     target that url.Parse reads otherwise than url.ParseRequestURI
//     (delivery parses the stored URL with the former: "//x/y" in origin
//     form is a path to the one and a host to the other).
//
// What net/http refuses itself before a handler runs (a Content-Length
// beside Transfer-Encoding on HTTP/1.1 is read by the chunks and the
// connection closed, see framing.go; two Content-Lengths that differ, two
// Host fields, a control character in a name, a value or the target,
// whitespace before a colon, a chunk size that is not hex, obs-fold at
// the start of the block) is answered 400 by net/http and never reaches
// the judge; obs-fold inside a block is replaced by a space (RFC 9112
// §5.2 allows either). Whatever passes and is spooled is then built once
// as delivery builds it (spool.NewRequest, in decide) before its 202.

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// judgeRequest is the door's verdict on r as net/http read it: "" to go
// on, else why it is refused (400, connection closed).
func judgeRequest(r *http.Request) string {
	if r.Method == http.MethodConnect {
		return ""
	}
	if !r.ProtoAtLeast(1, 1) {
		if why := judgeHTTP10(r); why != "" {
			return why
		}
	}
	for k := range r.Header {
		if field, ok := spool.FoldsToFraming(k); ok {
			return fmt.Sprintf("header %q is a look-alike of %s: refused, as a receiver that folds '_' and '-' would read two framings", k, field)
		}
	}
	return judgeTarget(r.RequestURI)
}

// judgeTarget checks a request target as it was sent (RequestURI). The
// one target url.Parse reads otherwise than url.ParseRequestURI, once
// '#' is refused, is an origin-form path starting with "//" (not "///"):
// a path to the latter, an authority to the former (FuzzJudgeTarget
// holds the two parsers to that).
func judgeTarget(raw string) string {
	if raw == "" || raw == "*" {
		return ""
	}
	if strings.IndexByte(raw, '#') >= 0 {
		return "request target holds '#': a fragment is not part of a request target (RFC 9112 §3.2) and would not be sent on"
	}
	for i := strings.IndexByte(raw, '%'); i >= 0 && i < len(raw); i++ {
		if raw[i] == '%' && (i+2 >= len(raw) || !isHex(raw[i+1]) || !isHex(raw[i+2])) {
			return "request target has an invalid percent-escape at byte " + strconv.Itoa(i) + ": '%' must be followed by two hex digits"
		}
	}
	if strings.HasPrefix(raw, "//") && !strings.HasPrefix(raw, "///") {
		return "request target starts with // : a URL parser reads its first segment as a host, so it would not be sent on as it came"
	}
	return ""
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// judgeHTTP10 checks an HTTP/1.0 request for the Transfer-Encoding field
// that net/http dropped: it must be the first request of its connection,
// whose raw header block the connection's headTap kept.
func judgeHTTP10(r *http.Request) string {
	tap, _ := r.Context().Value(tapKey{}).(*headTap)
	if tap == nil { // a server without TapListener and TapContext
		return "HTTP/1.0 request at a listener that can't check its framing: send HTTP/1.1"
	}
	head, ok := tap.firstHead()
	if !ok {
		return "HTTP/1.0 request after another on the same connection: hookpace takes one HTTP/1.0 request per connection, as its framing is checked on the first only"
	}
	line, rest, _ := bytes.Cut(head, []byte("\n"))
	if want := r.Method + " " + r.RequestURI + " " + r.Proto; string(bytes.TrimSuffix(line, []byte("\r"))) != want {
		return "HTTP/1.0 request whose header block could not be checked"
	}
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		name, _, ok := bytes.Cut(line, []byte(":"))
		if ok && strings.EqualFold(string(name), "Transfer-Encoding") {
			return "Transfer-Encoding on an HTTP/1.0 request: its framing is faulty (RFC 9112 §6.1); send HTTP/1.1, or HTTP/1.0 with a Content-Length"
		}
	}
	return ""
}

// refuseFraming answers a request the judge refused: 400 with the reason
// and Connection: close, then closes the connection after reading what
// the client may still be sending (for up to a second), so that the
// client reads the answer rather than a reset.
func refuseFraming(w http.ResponseWriter, why string) {
	body := "hookpace: " + why + "\n"
	rc := http.NewResponseController(w)
	conn, brw, err := rc.Hijack()
	if err != nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, body)
		return
	}
	defer conn.Close()
	fmt.Fprintf(brw, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	if brw.Flush() != nil {
		return
	}
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	conn.SetReadDeadline(time.Now().Add(time.Second))
	io.CopyN(io.Discard, brw, 1<<20)
}

// Strict puts the door's judge in front of h, an inbound route's handler:
// a request it refuses gets 400 and the connection is closed, with an
// ingest line for route.
func (p *Proxy) Strict(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if why := judgeRequest(r); why != "" {
			d := badRequest(why)
			d.route = route
			p.record(r, time.Now(), r.Host, 0, d)
			refuseFraming(w, why)
			return
		}
		if !r.ProtoAtLeast(1, 1) {
			w.Header().Set("Connection", "close") // one HTTP/1.0 request per connection
		}
		if t, _ := r.Context().Value(tapKey{}).(*headTap); t != nil && r.TLS == nil {
			// net/http sets TLS only for a *tls.Conn, which the tap hides.
			if tc, ok := t.Conn.(*tls.Conn); ok {
				st := tc.ConnectionState()
				r.TLS = &st
			}
		}
		h.ServeHTTP(w, r)
	})
}

// tapKey carries a connection's headTap in its requests' contexts.
type tapKey struct{}

// maxTap bounds the header block a headTap keeps; a longer one is not
// checked (and net/http refuses it past MaxHeaderBytes).
const maxTap = 1 << 20

// headTap keeps the raw header block of a connection's first request,
// when that request is HTTP/1.0: the one case where net/http drops a
// field (Transfer-Encoding) that the judge must see. Past that block it
// only passes reads through.
type headTap struct {
	net.Conn
	reading atomic.Bool // still reading the first header block
	mu      sync.Mutex
	head    []byte // what was read of it
	whole   bool   // head holds the whole block of an HTTP/1.0 request
	// taken: the first request was not HTTP/1.0, or the judge has had
	// its header block; a request asking now is not the first.
	taken bool
}

func newHeadTap(c net.Conn) *headTap {
	t := &headTap{Conn: c}
	t.reading.Store(true)
	return t
}

func (c *headTap) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && c.reading.Load() {
		c.mu.Lock()
		c.keep(b[:n])
		c.mu.Unlock()
	}
	return n, err
}

// keep adds b to the first header block, and stops at its end, at the end
// of a request line that is not HTTP/1.0, or at maxTap.
func (c *headTap) keep(b []byte) {
	from := max(len(c.head)-3, 0)
	c.head = append(c.head, b...)
	if i := bytes.IndexByte(c.head, '\n'); i >= 0 && !bytes.HasSuffix(bytes.TrimSuffix(c.head[:i], []byte("\r")), []byte(" HTTP/1.0")) {
		// HTTP/1.1 (or not HTTP): net/http keeps every field, and any
		// HTTP/1.0 request after it is not the first.
		c.head, c.taken = nil, true
		c.reading.Store(false)
		return
	}
	for _, end := range [][]byte{[]byte("\n\r\n"), []byte("\n\n")} {
		if i := bytes.Index(c.head[from:], end); i >= 0 {
			c.head, c.whole = c.head[:from+i+1], true
			c.reading.Store(false)
			return
		}
	}
	if len(c.head) > maxTap {
		c.head, c.taken = nil, true
		c.reading.Store(false)
	}
}

// firstHead returns the raw header block of the connection's first
// request, once: for the first request, when it is HTTP/1.0.
func (c *headTap) firstHead() ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.taken || !c.whole {
		c.taken = true
		return nil, false
	}
	c.taken = true
	return c.head, true
}

// CloseWrite half-closes the connection underneath.
func (c *headTap) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// TapListener gives each connection ln accepts a headTap; the server
// serving them sets ConnContext to TapContext.
func TapListener(ln net.Listener) net.Listener { return tapListener{ln} }

type tapListener struct{ net.Listener }

func (l tapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newHeadTap(c), nil
}

// TapContext is an http.Server's ConnContext for connections from a
// TapListener.
func TapContext(ctx context.Context, c net.Conn) context.Context {
	for {
		switch x := c.(type) {
		case *headTap:
			return context.WithValue(ctx, tapKey{}, x)
		case *notifyConn: // a tunnel's one connection (tunnel.go)
			c = x.Conn
		default:
			return ctx
		}
	}
}

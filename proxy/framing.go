package proxy

import (
	"io"
	"net/http"
	"time"
)

// Every parser hookpace has (the proxy listener, plain HTTP inside a
// CONNECT tunnel, an intercepted TLS tunnel, and the capture listener's)
// is a net/http server whose handler is Proxy.ServeHTTP, so the two
// bounds below are applied there, once, for all of them, after the
// door's judge (strict.go).
//
// Request smuggling (RFC 9112 §6.3): a request with both Content-Length
// and Transfer-Encoding: chunked is read by its chunks, and net/http drops
// the Content-Length before a handler sees it. A front end that went by
// the Content-Length would have sent the bytes after the chunks as part of
// this request; read as a second request on the same connection, they
// would be spooled. hookpace closes the connection after answering any
// request that came chunked, rather than looking for both headers in the
// raw header block: net/http has already parsed and normalised that block
// by the time a handler runs, a wrapper that re-parses it would be a second
// HTTP parser to keep exactly in step with the first (folding, duplicates,
// "chunked" in a list, obsolete line endings, inside tunnels and TLS), and
// webhooks almost always carry a Content-Length, so the cost is a new
// connection now and then for the rare chunked client. (The one raw look
// hookpace takes, strict.go's headTap, is at the first header block of a
// connection and only when it is HTTP/1.0, where net/http drops
// Transfer-Encoding without a trace; it frames nothing.)

// closeAfterChunked answers a chunked request, and an HTTP/1.0 one (one
// a connection, strict.go), with Connection: close, which makes net/http
// close the connection after the answer instead of reading another
// request from it.
func closeAfterChunked(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
	if (len(r.TransferEncoding) == 0 && r.ProtoAtLeast(1, 1)) || r.Method == http.MethodConnect {
		return w
	}
	return closingWriter{w}
}

// closingWriter sets Connection: close on the final answer, whatever the
// handler (goproxy copies a passthrough's response headers over its own)
// put there before.
type closingWriter struct{ http.ResponseWriter }

func (w closingWriter) WriteHeader(code int) {
	if code >= 200 {
		w.Header().Set("Connection", "close")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w closingWriter) Write(b []byte) (int, error) {
	w.Header().Set("Connection", "close") // no effect once the header is out
	return w.ResponseWriter.Write(b)
}

func (w closingWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

func (w closingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// withBodyDeadline gives a request with a body proxy.body_timeout to
// deliver it, from the end of its headers: reads past it fail, and the
// proxy answers 408. The deadline is lifted when the body has been read,
// so that a long passthrough response is not cut; CONNECT is left alone
// (its connection becomes a tunnel, whose requests get their own).
func withBodyDeadline(w http.ResponseWriter, r *http.Request, timeout time.Duration) {
	if timeout <= 0 || r.Method == http.MethodConnect || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return
	}
	b := &deadlineBody{ReadCloser: r.Body, rc: *http.NewResponseController(w)}
	if b.rc.SetReadDeadline(time.Now().Add(timeout)) == nil {
		r.Body = b
	}
}

type deadlineBody struct {
	io.ReadCloser
	rc     http.ResponseController // one allocation with the body's
	lifted bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.lifted {
		b.lifted = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

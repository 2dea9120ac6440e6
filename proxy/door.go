package proxy

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// Bounds at the door: a header block over spool.max_header_bytes is 431, a
// body slower than proxy.body_timeout is 408 (the server sets the read
// deadline, see withBodyDeadline), and a refusal given before the body
// was read leaves the client able to read it (drainAfter).

// headerBytes is the size of a header block as sent: "Name: value\r\n" per
// value.
func headerBytes(h http.Header) int64 {
	var n int64
	for k, vs := range h {
		for _, v := range vs {
			n += int64(len(k) + len(v) + 4)
		}
	}
	return n
}

func headersTooLarge(n, limit int64) decision {
	return decision{outcome: outcomeTooLarge, status: http.StatusRequestHeaderFieldsTooLarge,
		reason: fmt.Sprintf("headers of %d bytes exceed spool.max_header_bytes (%d bytes)", n, limit)}
}

// bodyTimedOut reports whether err is the read deadline of
// proxy.body_timeout passing, and the answer for it.
func bodyTimedOut(err error) (decision, bool) {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return decision{}, false
	}
	return decision{outcome: outcomeBadRequest, status: http.StatusRequestTimeout,
		reason: "request body not received within proxy.body_timeout",
		header: http.Header{"Connection": {"close"}}}, true
}

// drainSmall is what Go's server discards by itself after the handler
// returns, keeping the connection; a larger unread body makes it close the
// connection at once, and a client still writing then gets a reset instead
// of the answer.
const drainSmall = 256 << 10

// drainMin is the least of a refused body that is read and discarded
// (else 4x spool.max_body).
const drainMin = 16 << 20

// drainTime bounds how long the rest of a refused body is read.
const drainTime = 10 * time.Second

// seenBody counts what the handler read of a request body.
type seenBody struct {
	io.ReadCloser
	n   int64
	eof bool
}

func (b *seenBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// mustDrain says whether a refusal leaves more of the body unread than Go's
// server would discard.
func (b *seenBody) mustDrain(r *http.Request) bool {
	if b.eof || r.ContentLength == 0 {
		return false
	}
	if b.n == 0 && strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		return false // the client waits for a 100 Continue it will not get
	}
	return r.ContentLength < 0 || r.ContentLength-b.n > drainSmall
}

// drainAfter writes the answer (status and body, its headers already
// set) with Connection: close, then reads and discards the rest of the
// request body, up to limit bytes or drainTime, so that a client that
// writes its whole body before reading (Python's urllib, Node) reads the
// answer instead of a connection reset.
func drainAfter(w http.ResponseWriter, r *http.Request, status int, body []byte, limit int64) {
	rc := http.NewResponseController(w)
	rc.EnableFullDuplex()
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	w.Write(body)
	rc.Flush()
	rc.SetReadDeadline(time.Now().Add(drainTime))
	io.CopyN(io.Discard, r.Body, limit)
}

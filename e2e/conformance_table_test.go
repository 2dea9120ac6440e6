package e2e

import "strings"

// The conformance table: raw requests written from RFC 9112 (message
// syntax and framing) and RFC 9110 (fields), each sent alone on a new
// connection to every door by TestConformance. In head, {T} is the
// request target (absolute-form at the proxy listener, origin-form
// inside tunnels and at inbound routes) and {H} the Host; the head ends
// at the blank line, the rest is the body as written on the wire.
//
// Every case must end one of two ways: refused (a 4xx, or a 501 for a
// transfer coding the server does not implement, RFC 9112 §6.1, and the
// connection closed after it), or accepted and delivered once with
// exactly want as its body. refuse says which is required; false lets
// the door choose. Nothing may be acknowledged and then lost or changed.
type conformanceCase struct {
	name   string
	raw    string // the request, with {T} and {H}
	refuse bool   // must be refused
	want   string // the body a partner must get if accepted
	// doors limits the case to these doors ("" = all).
	doors string
	// suffix is added to the target (a fragment, a bad escape).
	suffix string
}

const hello = "hello"

func head(lines ...string) string {
	return "POST {T} HTTP/1.1\r\nHost: {H}\r\n" + strings.Join(lines, "\r\n") + "\r\n\r\n"
}

func head10(lines ...string) string {
	return "POST {T} HTTP/1.0\r\nHost: {H}\r\n" + strings.Join(lines, "\r\n") + "\r\n\r\n"
}

const chunkedHello = "5\r\nhello\r\n0\r\n\r\n"

var conformanceCases = []conformanceCase{
	// Baselines.
	{name: "content-length", raw: head("Content-Length: 5") + hello, want: hello},
	{name: "chunked", raw: head("Transfer-Encoding: chunked") + chunkedHello, want: hello},
	{name: "expect-100", raw: head("Content-Length: 5", "Expect: 100-continue") + hello, want: hello},

	// Content-Length and Transfer-Encoding together, and their variants
	// (RFC 9112 §6.1, §6.3).
	{name: "cl-and-te", raw: head("Content-Length: 30", "Transfer-Encoding: chunked") + chunkedHello, want: hello},
	{name: "te-and-cl", raw: head("Transfer-Encoding: chunked", "Content-Length: 3") + chunkedHello, want: hello},
	{name: "two-cl-differ", raw: head("Content-Length: 5", "Content-Length: 6") + hello, refuse: true},
	{name: "two-cl-same", raw: head("Content-Length: 5", "Content-Length: 5") + hello, want: hello},
	{name: "cl-list", raw: head("Content-Length: 5, 5") + hello, want: hello},
	{name: "cl-plus", raw: head("Content-Length: +5") + hello, refuse: true},
	{name: "cl-negative", raw: head("Content-Length: -1") + hello, refuse: true},
	{name: "cl-hex", raw: head("Content-Length: 0x5") + hello, refuse: true},
	{name: "cl-inner-space", raw: head("Content-Length: 5 5") + hello, refuse: true},
	{name: "cl-leading-zeros", raw: head("Content-Length: 005") + hello, want: hello},
	{name: "cl-space-before-colon", raw: head("Content-Length : 5") + hello, refuse: true},
	{name: "te-space-before-colon", raw: head("Content-Length: 5", "Transfer-Encoding : chunked") + hello, refuse: true},
	{name: "te-unknown", raw: head("Transfer-Encoding: xchunked") + chunkedHello, refuse: true},
	{name: "te-gzip-chunked", raw: head("Transfer-Encoding: gzip, chunked") + chunkedHello, refuse: true},
	{name: "te-identity", raw: head("Transfer-Encoding: identity", "Content-Length: 5") + hello, refuse: true},
	{name: "te-twice", raw: head("Transfer-Encoding: chunked", "Transfer-Encoding: chunked") + chunkedHello, refuse: true},
	{name: "te-chunked-twice-in-list", raw: head("Transfer-Encoding: chunked, chunked") + chunkedHello, refuse: true},
	{name: "te-case", raw: head("Transfer-Encoding: Chunked") + chunkedHello, want: hello},
	{name: "te-ows", raw: head("Transfer-Encoding: \tchunked \t") + chunkedHello, want: hello},
	{name: "te-obs-fold", raw: head("Transfer-Encoding:", " chunked") + chunkedHello, want: hello},
	{name: "te-vertical-tab", raw: head("Transfer-Encoding:\vchunked") + chunkedHello, refuse: true},

	// HTTP/1.0 and Transfer-Encoding (RFC 9112 §6.1: faulty framing).
	{name: "http10-content-length", raw: head10("Content-Length: 5") + hello, want: hello},
	{name: "http10-chunked", raw: head10("Transfer-Encoding: chunked") + chunkedHello, refuse: true},
	{name: "http10-chunked-and-cl", raw: head10("Content-Length: 5", "Transfer-Encoding: chunked") + chunkedHello, refuse: true},
	{name: "http10-chunked-keepalive", raw: head10("Transfer-Encoding: chunked", "Connection: keep-alive") + chunkedHello, refuse: true},
	{name: "http10-chunked-lower", raw: head10("transfer-encoding: chunked") + chunkedHello, refuse: true},

	// Chunk sizes and extensions (RFC 9112 §7.1).
	{name: "chunk-size-upper-hex", raw: head("Transfer-Encoding: chunked") + "A\r\n0123456789\r\n0\r\n\r\n", want: "0123456789"},
	{name: "chunk-size-leading-zeros", raw: head("Transfer-Encoding: chunked") + "0005\r\nhello\r\n0\r\n\r\n", want: hello},
	{name: "chunk-size-negative", raw: head("Transfer-Encoding: chunked") + "-5\r\nhello\r\n0\r\n\r\n", refuse: true},
	{name: "chunk-size-0x", raw: head("Transfer-Encoding: chunked") + "0x5\r\nhello\r\n0\r\n\r\n", refuse: true},
	{name: "chunk-size-overflow", raw: head("Transfer-Encoding: chunked") + "10000000000000005\r\nhello\r\n0\r\n\r\n", refuse: true},
	{name: "chunk-size-missing", raw: head("Transfer-Encoding: chunked") + "\r\nhello\r\n0\r\n\r\n", refuse: true},
	{name: "chunk-data-overrun", raw: head("Transfer-Encoding: chunked") + "5\r\nhelloXX\r\n0\r\n\r\n", refuse: true},
	{name: "chunk-ext", raw: head("Transfer-Encoding: chunked") + "5;name=value\r\nhello\r\n0;last\r\n\r\n", want: hello},
	{name: "chunk-ext-quoted", raw: head("Transfer-Encoding: chunked") + "5;n=\"a;b\"\r\nhello\r\n0\r\n\r\n", want: hello},
	{name: "chunk-ext-long", raw: head("Transfer-Encoding: chunked") + "5;" + strings.Repeat("x", 8000) + "\r\nhello\r\n0\r\n\r\n"},
	{name: "chunk-ext-bare-lf", raw: head("Transfer-Encoding: chunked") + "5;a\nX\r\nhello\r\n0\r\n\r\n", refuse: true},
	{name: "chunk-bare-lf", raw: head("Transfer-Encoding: chunked") + "5\nhello\n0\n\n", want: hello},
	{name: "chunk-trailer", raw: head("Transfer-Encoding: chunked") + "5\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n", want: hello},
	{name: "chunk-trailer-cl", raw: head("Transfer-Encoding: chunked") + "5\r\nhello\r\n0\r\nContent-Length: 50\r\n\r\n", want: hello},

	// obs-fold and line endings (RFC 9112 §5.2, §2.2).
	{name: "obs-fold", raw: head("Content-Length: 5", "X-Folded: a", " b") + hello, want: hello},
	{name: "obs-fold-tab", raw: head("Content-Length: 5", "X-Folded: a", "\tb") + hello, want: hello},
	{name: "obs-fold-first-line", raw: "POST {T} HTTP/1.1\r\n X-Lead: a\r\nHost: {H}\r\nContent-Length: 5\r\n\r\n" + hello, refuse: true},
	{name: "bare-lf-lines", raw: "POST {T} HTTP/1.1\nHost: {H}\nContent-Length: 5\n\n" + hello, want: hello},
	{name: "bare-cr", raw: head("Content-Length: 5", "X-Cr: a\rb") + hello, refuse: true},

	// Control characters (RFC 9110 §5.5, RFC 9112 §3).
	{name: "ctl-in-value", raw: head("Content-Length: 5", "X-Ctl: a\x01b") + hello, refuse: true},
	{name: "nul-in-value", raw: head("Content-Length: 5", "X-Nul: a\x00b") + hello, refuse: true},
	{name: "del-in-value", raw: head("Content-Length: 5", "X-Del: a\x7fb") + hello, refuse: true},
	{name: "ctl-in-name", raw: head("Content-Length: 5", "X\x01Ctl: 1") + hello, refuse: true},
	{name: "space-in-name", raw: head("Content-Length: 5", "X Ctl: 1") + hello, refuse: true},
	{name: "empty-name", raw: head("Content-Length: 5", ": 1") + hello, refuse: true},
	{name: "ctl-in-target", suffix: "\x01", raw: head("Content-Length: 5") + hello, refuse: true},
	{name: "space-in-target", suffix: " x", raw: head("Content-Length: 5") + hello, refuse: true},

	// Look-alikes of framing fields.
	{name: "lookalike-transfer_encoding", raw: head("Content-Length: 5", "Transfer_Encoding: chunked") + hello, refuse: true},
	{name: "lookalike-content_length", raw: head("Content-Length: 5", "Content_Length: 1000") + hello, refuse: true},
	{name: "lookalike-transfer---encoding", raw: head("Content-Length: 5", "Transfer---Encoding: chunked") + hello, refuse: true},
	{name: "lookalike-transfer___encoding", raw: head("Content-Length: 5", "Transfer___Encoding: chunked") + hello, refuse: true},
	{name: "lookalike-host", raw: head("Content-Length: 5", "Ho_st: evil.example") + hello, refuse: true},
	{name: "lookalike-connection", raw: head("Content-Length: 5", "Connection_: close") + hello, refuse: true},
	{name: "lookalike-upgrade", raw: head("Content-Length: 5", "Up_grade: h2c") + hello, refuse: true},
	{name: "lookalike-te", raw: head("Content-Length: 5", "T_E: trailers") + hello, refuse: true},

	// Fragments and escapes in the target (RFC 9112 §3.2, RFC 3986 §2.1).
	{name: "fragment-bad-escape", suffix: "?a=1#%^", raw: head("Content-Length: 5") + hello, refuse: true},
	{name: "fragment", suffix: "#frag", raw: head("Content-Length: 5") + hello, refuse: true},
	{name: "bad-escape-query", suffix: "?a=%zz", raw: head("Content-Length: 5") + hello, refuse: true},
	{name: "bad-escape-path", suffix: "/%zz", raw: head("Content-Length: 5") + hello, refuse: true},
	{name: "escape-cut-short", suffix: "?a=%4", raw: head("Content-Length: 5") + hello, refuse: true},
	{name: "good-escapes", suffix: "/%41?q=%7e", raw: head("Content-Length: 5") + hello, want: hello},

	// Host (RFC 9112 §3.2, §3.2.2).
	{name: "duplicate-host", raw: "POST {T} HTTP/1.1\r\nHost: {H}\r\nHost: other.example\r\nContent-Length: 5\r\n\r\n" + hello, refuse: true},
	{name: "no-host", raw: "POST {T} HTTP/1.1\r\nContent-Length: 5\r\n\r\n" + hello, refuse: true},
	{name: "host-with-path", raw: "POST {T} HTTP/1.1\r\nHost: {H}/x\r\nContent-Length: 5\r\n\r\n" + hello, refuse: true},
	// Absolute-form with another Host: the target's authority wins.
	{name: "absolute-host-mismatch", doors: "door", raw: "POST {T} HTTP/1.1\r\nHost: other.example\r\nContent-Length: 5\r\n\r\n" + hello, want: hello},
	// Inside a tunnel, a request for another host than the tunnel's.
	{name: "host-not-the-tunnels", doors: "tunnel,mitm", raw: "POST {T} HTTP/1.1\r\nHost: other.example\r\nContent-Length: 5\r\n\r\n" + hello, refuse: true},

	// Header counts and sizes (RFC 9110 §5.4; spool.max_header_bytes).
	{name: "many-headers", raw: head(append(manyHeaders(500, 8), "Content-Length: 5")...) + hello, want: hello},
	{name: "headers-too-large", raw: head(append(manyHeaders(2000, 100), "Content-Length: 5")...) + hello, refuse: true},
	{name: "one-huge-header", raw: head("Content-Length: 5", "X-Huge: "+strings.Repeat("a", 2<<20)) + hello, refuse: true},
}

// manyHeaders is n distinct fields with values of size bytes.
func manyHeaders(n, size int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "X-H" + itoa(i) + ": " + strings.Repeat("v", size)
	}
	return out
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

package spool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// NewRequest builds the HTTP request that delivers a stored webhook:
// method to rawURL with header h and body. It is the one builder: ingest
// calls it on what it is about to store, before the 202, and delivery on
// what it sends, so that what was acknowledged is exactly what can be
// sent. An error is the request's own (never the destination's): a
// method that is not a token, a URL that does not parse or parses to
// something other than what was stored (a fragment, which no client
// sends), a scheme other than http or https, no host, or a header that
// net/http would refuse to write or that folds to a framing header (see
// FoldsToFraming).
func NewRequest(ctx context.Context, method, rawURL string, h http.Header, body []byte) (*http.Request, error) {
	if strings.IndexByte(rawURL, '#') >= 0 {
		return nil, errors.New("URL holds '#': a fragment is never sent, the URL stored is not the one that would be")
	}
	var rd io.Reader
	if body != nil { // nil: ingest's check, which sends nothing
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, rawURL, rd)
	if err != nil {
		return nil, err
	}
	if u := req.URL; (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return nil, fmt.Errorf("URL %q is not an absolute http or https URL with a host", u.Redacted())
	}
	if !httpguts.ValidHostHeader(req.Host) {
		return nil, fmt.Errorf("URL host %q is not a valid Host header", req.Host)
	}
	if err := CheckHeader(h); err != nil {
		return nil, err
	}
	if h == nil {
		h = http.Header{}
	}
	req.Header = h
	return req, nil
}

// CheckRequest is NewRequest's verdict on method, rawURL and h without
// building the request: the same checks in the same order, with the same
// errors. Ingest asks it of what it is about to store; delivery builds
// with NewRequest.
func CheckRequest(method, rawURL string, h http.Header) error {
	if strings.IndexByte(rawURL, '#') >= 0 {
		return errors.New("URL holds '#': a fragment is never sent, the URL stored is not the one that would be")
	}
	if method != "" && !httpguts.ValidHeaderFieldName(method) {
		// net/http's own words for a method that is not a token
		return fmt.Errorf("net/http: invalid method %q", method)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	// The host as net/http keeps it (and sends it as Host): less an
	// empty port.
	if strings.LastIndex(u.Host, ":") > strings.LastIndex(u.Host, "]") {
		u.Host = strings.TrimSuffix(u.Host, ":")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("URL %q is not an absolute http or https URL with a host", u.Redacted())
	}
	if !httpguts.ValidHostHeader(u.Host) {
		return fmt.Errorf("URL host %q is not a valid Host header", u.Host)
	}
	return CheckHeader(h)
}

// CheckHeader refuses a header that net/http would refuse to write (a
// name that is not a token, a value with CR, LF or NUL) or that has a
// name folding to a framing header (FoldsToFraming).
func CheckHeader(h http.Header) error {
	for k, vs := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("header name %q is not a token", k)
		}
		if field, ok := FoldsToFraming(k); ok {
			return fmt.Errorf("header %q is a look-alike of %s: a receiver that folds '_' and '-' would read two framings", k, field)
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("header %q has a value with a control character", k)
			}
		}
	}
	return nil
}

// foldedFraming is the framing field whose name, with every character
// but letters and digits left out and lower-cased, is folded (RFC 9112
// §6, RFC 9110 §7.2, §7.6), or "".
func foldedFraming(folded []byte) string {
	switch string(folded) {
	case "contentlength":
		return "Content-Length"
	case "transferencoding":
		return "Transfer-Encoding"
	case "host":
		return "Host"
	case "connection":
		return "Connection"
	case "upgrade":
		return "Upgrade"
	case "te":
		return "TE"
	}
	return ""
}

// FoldsToFraming reports whether name is a look-alike of a framing field
// (Content-Length, Transfer-Encoding, Host, Connection, Upgrade, TE), and
// which: not the field itself, but the same letters once '_', '-' and the
// other punctuation a token allows are left out and case is ignored
// (Transfer_Encoding, Content__Length, Transfer---Encoding, T_E). CGI,
// WSGI and Rack turn '-' and '_' alike into '_', so a receiver behind one
// of them reads such a header as the framing field itself.
func FoldsToFraming(name string) (field string, ok bool) {
	if len(name) < 2 || len(name) > 40 {
		return "", false
	}
	var buf [40]byte
	n := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		default:
			continue
		}
		buf[n] = c
		n++
	}
	field = foldedFraming(buf[:n])
	if field == "" || strings.EqualFold(name, field) {
		return "", false
	}
	return field, true
}

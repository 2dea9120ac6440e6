// Package hostname holds hookpace's one rule for DNS host names. Config
// (host keys, egress entries, listen addresses), the egress guard, the MITM
// CA and the proxy's ingest all call it, so that a name one of them accepts
// is accepted by every other.
package hostname

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// MaxLen is the longest host name, without a trailing dot (RFC 1035).
const MaxLen = 253

// Check reports whether name is a host name: labels of 1 to 63 ASCII
// letters, digits, '-' and '_' (as in "_dmarc"), joined by single dots,
// none beginning or ending with '-', and a last label that is not all
// digits (so that "1.2.3" and "*.123" are not names that look like an IP
// address). Case is not significant; a trailing dot is not accepted (see
// Normalize). IP literals are not host names: callers try them first.
func Check(name string) error {
	if name == "" {
		return errors.New("malformed host name \"\": empty")
	}
	if len(name) > MaxLen {
		return fmt.Errorf("malformed host name %q: longer than %d characters", trunc(name), MaxLen)
	}
	last := ""
	for label := range strings.SplitSeq(name, ".") {
		if err := checkLabel(label); err != nil {
			return fmt.Errorf("malformed host name %q: %w", name, err)
		}
		last = label
	}
	if strings.Trim(last, "0123456789") == "" {
		return fmt.Errorf("malformed host name %q: all-numeric top-level label", name)
	}
	return nil
}

func checkLabel(label string) error {
	switch {
	case label == "":
		return errors.New("empty label")
	case len(label) > 63:
		return errors.New("label longer than 63 characters")
	case label[0] == '-' || label[len(label)-1] == '-':
		return fmt.Errorf("label %q begins or ends with '-'", label)
	}
	for _, c := range label {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("unexpected %q", c)
		}
	}
	return nil
}

// Normalize checks name, less one trailing dot, and lower-cases it
// ("Partner.Example." is "partner.example"). It checks before it
// lower-cases: strings.ToLower maps some non-ASCII letters to ASCII (the
// Kelvin sign to 'k'), which must not turn a name that DNS would not know
// into one that a rule matches.
func Normalize(name string) (string, error) {
	n := name
	if len(n) > 1 {
		n = strings.TrimSuffix(n, ".")
	}
	if err := Check(n); err != nil {
		return "", err
	}
	return strings.ToLower(n), nil
}

func trunc(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Parse reads a destination host as it appears in a URL or a CONNECT
// target, without port or brackets: an IP address, which must not carry a
// zone ("fe80::1%eth0" names an interface of this machine, not a
// destination), or a host name, which it normalizes. Exactly one of name
// and ip is set when err is nil.
func Parse(host string) (name string, ip netip.Addr, err error) {
	if a, perr := netip.ParseAddr(host); perr == nil {
		if a.Zone() != "" {
			return "", netip.Addr{}, fmt.Errorf("IP address %q: zones are not allowed", host)
		}
		return "", a, nil
	}
	if strings.ContainsAny(host, ":%[]") || host != "" && strings.Trim(host, "0123456789.") == "" {
		return "", netip.Addr{}, fmt.Errorf("malformed IP address %q", host)
	}
	name, err = Normalize(host)
	return name, netip.Addr{}, err
}

// Key is the queue and config key of a destination: the lower-case
// host, with the port only when it is not the scheme's default. A fully
// qualified name's trailing dot is dropped: "partner.example." is the same
// partner, with the same limits, as "partner.example". An IPv6 address is
// written in its short form ("0:0::1" is "::1"), as config writes hosts
// keys.
func Key(u *url.URL) string {
	host := strings.ToLower(u.Hostname())
	if len(host) > 1 {
		host = strings.TrimSuffix(host, ".")
	}
	if strings.IndexByte(host, ':') >= 0 {
		if a, err := netip.ParseAddr(host); err == nil {
			host = a.String()
		}
	}
	port := u.Port()
	if port == "" || (port == "80" && u.Scheme == "http") || (port == "443" && u.Scheme == "https") {
		return host
	}
	return net.JoinHostPort(host, port)
}

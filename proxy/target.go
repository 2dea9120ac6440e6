package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"

	"github.com/hookpace/hookpace/hostname"
)

// CheckTarget refuses a destination that no request could reach: a scheme
// other than http or https, no host, a host that is neither an IP address
// (without a zone) nor a host name by hookpace's one rule (the rule config
// checks host keys and egress entries with), or a port outside 1..65535.
// Every path checks it first: ingest, passthrough and CONNECT.
func CheckTarget(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("unsupported scheme %q: hookpace forwards http and https only", u.Scheme)
	}
	h := u.Hostname()
	if h == "" {
		return errors.New("request URL has no host")
	}
	if _, _, err := hostname.Parse(h); err != nil {
		return fmt.Errorf("invalid host: %w", err)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return fmt.Errorf("invalid port %q: want 1..65535", p)
		}
	}
	return nil
}

// HostKey is the queue and config key of a destination (hostname.Key).
func HostKey(u *url.URL) string { return hostname.Key(u) }

// destPort is the port a URL will be dialled on.
func destPort(u *url.URL) uint16 {
	if p, err := strconv.ParseUint(u.Port(), 10, 16); err == nil {
		return uint16(p)
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

// hostOnly is target (host:port) without its port and brackets.
func hostOnly(target string) string {
	if h, _, err := net.SplitHostPort(target); err == nil {
		return h
	}
	return target
}

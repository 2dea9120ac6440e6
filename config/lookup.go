package config

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/hookpace/hookpace/hostname"
)

// hostIndex answers Config.Lookup with at most two exact map probes plus one
// or two per dot in the host name, without allocating.
type hostIndex struct {
	exact map[string]bool    // non-wildcard keys
	wild  map[wildKey]string // "*.suffix[:port]" keys by suffix and port
}

type wildKey struct{ suffix, port string }

func newHostIndex(hosts map[string]HostConfig) *hostIndex {
	idx := &hostIndex{exact: map[string]bool{}, wild: map[wildKey]string{}}
	for key := range hosts {
		if rest, ok := strings.CutPrefix(key, "*."); ok {
			host, port := splitHostPort(rest)
			idx.wild[wildKey{host, port}] = key
		} else {
			idx.exact[key] = true
		}
	}
	return idx
}

func (idx *hostIndex) match(hostport string) (string, bool) {
	if idx.exact[hostport] {
		return hostport, true
	}
	host, port := splitHostPort(hostport)
	if host != hostport && idx.exact[host] { // port stripped, or "[v6]" unbracketed
		return host, true
	}
	if len(idx.wild) == 0 {
		return "", false
	}
	// Strip one leading label at a time: the longest suffix is tried first.
	for s := host; ; {
		i := strings.IndexByte(s, '.')
		if i < 0 {
			return "", false
		}
		s = s[i+1:]
		if port != "" {
			if key, ok := idx.wild[wildKey{s, port}]; ok {
				return key, true
			}
		}
		if key, ok := idx.wild[wildKey{s, ""}]; ok {
			return key, true
		}
	}
}

// splitHostPort splits "host:port", "[v6]:port", "[v6]", "v6" or "host"
// without allocating; port is "" when absent.
func splitHostPort(hp string) (host, port string) {
	if strings.HasPrefix(hp, "[") {
		if i := strings.LastIndex(hp, "]:"); i >= 0 {
			return hp[1:i], hp[i+2:]
		}
		return strings.TrimSuffix(hp[1:], "]"), ""
	}
	if i := strings.IndexByte(hp, ':'); i >= 0 && strings.LastIndexByte(hp, ':') == i {
		return hp[:i], hp[i+1:]
	}
	return hp, ""
}

// normalizeHostKey drops a trailing dot from a hosts key's name, as
// proxy.HostKey does for a request ("Partner.Example.:8443" is
// "partner.example:8443"), checks it and lower-cases it. It checks first:
// strings.ToLower would turn some non-ASCII letters into ASCII ones.
func normalizeHostKey(raw string) (string, error) {
	key := raw
	if !strings.Contains(key, "[") {
		host, port := key, ""
		if i := strings.IndexByte(key, ':'); i >= 0 && strings.LastIndexByte(key, ':') == i {
			host, port = key[:i], key[i:]
		}
		if len(host) > 1 && strings.HasSuffix(host, ".") {
			key = host[:len(host)-1] + port
		}
	}
	if err := checkHostKey(key); err != nil {
		return "", err
	}
	return canonicalHostKey(strings.ToLower(key)), nil
}

// canonicalHostKey writes a checked, lower-cased key one way, so that two
// spellings of one key are caught as duplicates: without a default port
// (":80" and ":443": proxy.HostKey keeps neither for its scheme, and
// Lookup goes from host:port to host), and with an IPv6 address in its
// short form ("[0:0::1]:8443" is "[::1]:8443"; "[0:0::1]:80" is "::1").
func canonicalHostKey(key string) string {
	if a, err := netip.ParseAddr(key); err == nil {
		return a.String()
	}
	rest, wild := strings.CutPrefix(key, "*.")
	host, port := splitHostPort(rest)
	if port == "80" || port == "443" {
		port = ""
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
		host = a.String()
		if port != "" {
			host = "[" + host + "]"
		}
	}
	if wild {
		host = "*." + host
	}
	if port != "" {
		return host + ":" + port
	}
	return host
}

// checkHostKey validates a hosts key: "host", "host:port",
// "*.suffix" or "*.suffix:port", where host is a DNS name or IP address
// (IPv6 bracketed when it has a port: "[2001:db8::1]:8443").
func checkHostKey(key string) error {
	if strings.Contains(key, "/") {
		return fmt.Errorf("host key %q: want host, host:port or *.suffix, without scheme or path", key)
	}
	if a, err := netip.ParseAddr(key); err == nil && a.Zone() == "" {
		return nil // bare IPv4 or IPv6 address
	}
	rest, wild := strings.CutPrefix(key, "*.")
	host, port := splitHostPort(rest)
	if strings.HasPrefix(rest, "[") {
		if a, err := netip.ParseAddr(host); wild || err != nil || !a.Is6() || a.Zone() != "" || port == "" {
			return fmt.Errorf("host key %q: want [IPv6]:port or an IPv6 address without brackets", key)
		}
	} else if a, err := netip.ParseAddr(host); err == nil && a.Is4() && !wild {
		// IPv4 address with a port
	} else if err := hostname.Check(host); err != nil {
		return fmt.Errorf("host key %q: %w", key, err)
	}
	if port != "" || strings.HasSuffix(rest, ":") {
		if err := checkPort(port, false); err != nil {
			return fmt.Errorf("host key %q: %w", key, err)
		}
	}
	return nil
}

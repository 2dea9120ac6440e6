package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/hookpace/hookpace/hostname"
)

// hostPattern is a lower-case host name; wildcard patterns ("*.x.example")
// match any name ending in ".x.example" but not "x.example" itself.
type hostPattern struct {
	name     string // without the "*." of a wildcard
	wildcard bool
}

func (p hostPattern) match(name string) bool {
	if p.wildcard {
		return strings.HasSuffix(name, "."+p.name)
	}
	return name == p.name
}

func matchHost(pats []hostPattern, name string) bool {
	if name == "" {
		return false // IP literals are matched by CIDR rules only
	}
	for _, p := range pats {
		if p.match(name) {
			return true
		}
	}
	return false
}

func normalizeName(s string) string {
	return strings.TrimSuffix(strings.ToLower(s), ".")
}

// parseRules splits entries into CIDRs (a bare IP is a single-address
// prefix) and host-name patterns.
func parseRules(field string, entries []string) ([]netip.Prefix, []hostPattern, error) {
	var nets []netip.Prefix
	var hosts []hostPattern
	for i, e := range entries {
		p, hp, isNet, err := parseRule(e)
		switch {
		case err != nil:
			return nil, nil, fmt.Errorf("egress: %s[%d] %q: %w", field, i, e, err)
		case isNet:
			nets = append(nets, p)
		default:
			hosts = append(hosts, hp)
		}
	}
	return nets, hosts, nil
}

// CheckRule reports whether s is an entry that Options.Allow and Deny
// accept. Its error is the one New gives for s, less the field and index:
// config checks egress entries with it, so that check-config refuses
// exactly what a start refuses.
func CheckRule(s string) error {
	_, _, _, err := parseRule(s)
	return err
}

// parseRule parses one entry: a CIDR or IP (isNet), else a host pattern.
func parseRule(e string) (p netip.Prefix, hp hostPattern, isNet bool, err error) {
	s := strings.TrimSpace(e)
	if p, err := parsePrefix(s); err == nil {
		return p, hostPattern{}, true, nil
	} else if strings.ContainsAny(s, ":/%") {
		return netip.Prefix{}, hostPattern{}, false, err
	}
	hp, err = parseHostPattern(s)
	return netip.Prefix{}, hp, false, err
}

// parsePrefix accepts a CIDR or a single IP. IPv4-mapped IPv6 prefixes
// (::ffff:10.0.0.0/104) become their IPv4 form, because addresses are
// unmapped before matching.
func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("malformed IP address %q%s", s, netipReason(err))
		}
		if a.Zone() != "" {
			return netip.Prefix{}, errors.New("zones are not allowed")
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("malformed CIDR %q%s", s, netipReason(err))
	}
	if a := p.Addr(); a.Is4In6() {
		if p.Bits() < 96 {
			return netip.Prefix{}, errors.New("IPv4-mapped prefix shorter than /96")
		}
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// netipReason is the tail of a netip parse error, after its echo of the
// input: ": prefix length out of range".
func netipReason(err error) string {
	if _, r, ok := strings.Cut(err.Error(), "): "); ok {
		return ": " + r
	}
	return ""
}

// parseHostPattern parses "name" or "*.name" with hostname's rule; the
// name is lower-cased and loses a trailing dot.
func parseHostPattern(s string) (hostPattern, error) {
	rest, wild := strings.CutPrefix(s, "*.")
	if strings.Trim(rest, "0123456789.") == "" && rest != "" {
		return hostPattern{}, fmt.Errorf("malformed IP address %q", rest)
	}
	name, err := hostname.Normalize(rest)
	if err != nil {
		if strings.Contains(rest, "*") {
			return hostPattern{}, fmt.Errorf("not a CIDR, IP or host name: only a leading \"*.\" wildcard is supported")
		}
		return hostPattern{}, fmt.Errorf("not a CIDR, IP or host name: %w", err)
	}
	return hostPattern{name: name, wildcard: wild}, nil
}

// parseSelf parses a listener address. An empty host means every address,
// as it does for net.Listen, and so does "localhost" (see below).
func parseSelf(s string) (netip.AddrPort, error) {
	host, portStr, err := net.SplitHostPort(strings.TrimSpace(s))
	if err != nil {
		return netip.AddrPort{}, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return netip.AddrPort{}, fmt.Errorf("bad port %q", portStr)
	}
	var a netip.Addr
	switch strings.ToLower(host) {
	case "":
		a = netip.IPv6Unspecified()
	case "localhost":
		// Treated as "every local address": loopback is the part that matters,
		// and a narrower match would miss ::1 vs 127.0.0.1.
		a = netip.IPv6Unspecified()
	default:
		if a, err = netip.ParseAddr(host); err != nil {
			return netip.AddrPort{}, errors.New("host must be an IP address, \"localhost\" or empty")
		}
	}
	return netip.AddrPortFrom(a.Unmap().WithZone(""), uint16(port)), nil
}

package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
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
		s := strings.TrimSpace(e)
		if p, err := parsePrefix(s); err == nil {
			nets = append(nets, p)
			continue
		} else if strings.ContainsAny(s, ":/") {
			return nil, nil, fmt.Errorf("egress: %s[%d] %q: %w", field, i, e, err)
		}
		hp, err := parseHostPattern(s)
		if err != nil {
			return nil, nil, fmt.Errorf("egress: %s[%d] %q: %w", field, i, e, err)
		}
		hosts = append(hosts, hp)
	}
	return nets, hosts, nil
}

// parsePrefix accepts a CIDR or a single IP. IPv4-mapped IPv6 prefixes
// (::ffff:10.0.0.0/104) become their IPv4 form, because addresses are
// unmapped before matching.
func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("not an IP address: %w", err)
		}
		if a.Zone() != "" {
			return netip.Prefix{}, errors.New("zones are not allowed")
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("not a CIDR: %w", err)
	}
	if a := p.Addr(); a.Is4In6() {
		if p.Bits() < 96 {
			return netip.Prefix{}, errors.New("IPv4-mapped prefix shorter than /96")
		}
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

func parseHostPattern(s string) (hostPattern, error) {
	name := normalizeName(s)
	hp := hostPattern{name: name}
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		hp = hostPattern{name: rest, wildcard: true}
	}
	if hp.name == "" || len(hp.name) > 253 {
		return hostPattern{}, errors.New("not a CIDR, IP or host name")
	}
	if last := hp.name[strings.LastIndex(hp.name, ".")+1:]; strings.Trim(last, "0123456789") == "" {
		return hostPattern{}, errors.New("not a CIDR, IP or host name (all-numeric top-level label)")
	}
	for label := range strings.SplitSeq(hp.name, ".") {
		if label == "" || len(label) > 63 {
			return hostPattern{}, errors.New("not a CIDR, IP or host name (empty or long label)")
		}
		for _, c := range label {
			ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
			if !ok {
				return hostPattern{}, fmt.Errorf("not a CIDR, IP or host name (bad character %q; only a leading \"*.\" wildcard is supported)", c)
			}
		}
	}
	return hp, nil
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

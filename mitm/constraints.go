package mitm

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/hookpace/hookpace/hostname"
)

// Names are what a CA may vouch for: X.509 name constraints in the form
// RFC 5280 gives them. A DNS constraint "partner.example" permits that
// name and every name below it; ".slack.example" permits only names below
// slack.example (written "*.slack.example" in config). Constraints apply
// per name type, so a CA whose names hold no IP excludes every IP, and one
// whose names hold no DNS name excludes every DNS name.
type Names struct {
	DNS []string       // sorted, lower case; a leading dot for "*." entries
	IP  []netip.Prefix // sorted; a single address is a /32 or /128
	// Open permits every DNS name but those under Exclude, and no IP
	// address: the open-world CA, which vouches for any partner name.
	// DNS and IP are empty then.
	Open bool
	// Exclude are DNS names excluded with every name below them, sorted:
	// an open-world CA's, or what an operator's CA excludes.
	Exclude []string
}

// DefaultExclude are the names an open-world CA never vouches for: the
// cluster's own services and the private DNS suffixes in common use.
var DefaultExclude = []string{"cluster.local", "internal", "local", "svc"}

// OpenNames are the open-world CA's constraints: every DNS name except
// DefaultExclude and extra (names, each with the names below it; a
// leading "*." or "." is the same), and no IP address at all.
func OpenNames(extra []string) (Names, error) {
	n := Names{Open: true, Exclude: slices.Clone(DefaultExclude)}
	for _, e := range extra {
		s := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(e), "*"), ".")
		if _, err := netip.ParsePrefix(s); err == nil {
			return Names{}, fmt.Errorf("%q: an IP range; an open-world CA excludes every IP address already", e)
		}
		if _, err := netip.ParseAddr(s); err == nil {
			return Names{}, fmt.Errorf("%q: an IP address; an open-world CA excludes every IP address already", e)
		}
		name, err := hostname.Normalize(s)
		if err != nil {
			return Names{}, fmt.Errorf("%q: %w", e, err)
		}
		n.Exclude = append(n.Exclude, name)
	}
	n.sort()
	return n, nil
}

// Same reports whether n and other are the same constraints.
func (n Names) Same(other Names) bool {
	return n.Open == other.Open && slices.Equal(n.DNS, other.DNS) && slices.Equal(n.IP, other.IP) && slices.Equal(n.Exclude, other.Exclude)
}

// excluded reports whether DNS name (normalized) is under an exclusion.
func (n Names) excluded(name string) bool {
	return slices.ContainsFunc(n.Exclude, func(c string) bool { return dnsMatch(name, c) })
}

// ParseNames reads host keys and mitm.hosts entries: a DNS name, "*." and
// a suffix, an IP address or a CIDR, each with an optional port (ignored:
// a certificate does not name ports). Duplicates are dropped.
func ParseNames(entries []string) (Names, error) {
	var n Names
	for _, e := range entries {
		s := strings.TrimSpace(e)
		if p, err := netip.ParsePrefix(s); err == nil {
			n.IP = append(n.IP, p.Masked())
			continue
		}
		if h, _, err := net.SplitHostPort(s); err == nil {
			s = h
		}
		s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
		if ip, err := netip.ParseAddr(s); err == nil {
			ip = ip.Unmap()
			n.IP = append(n.IP, netip.PrefixFrom(ip, ip.BitLen()))
			continue
		}
		wild := strings.HasPrefix(s, "*.")
		name, err := hostname.Normalize(strings.TrimPrefix(s, "*."))
		if err != nil {
			return Names{}, fmt.Errorf("%q: %w", e, err)
		}
		if wild {
			name = "." + name
		}
		n.DNS = append(n.DNS, name)
	}
	n.sort()
	return n, nil
}

// sort orders n's names and drops duplicates.
func (n *Names) sort() {
	slices.Sort(n.DNS)
	n.DNS = slices.Compact(n.DNS)
	slices.SortFunc(n.IP, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	n.IP = slices.Compact(n.IP)
	slices.Sort(n.Exclude)
	n.Exclude = slices.Compact(n.Exclude)
}

// Empty reports whether n permits nothing.
func (n Names) Empty() bool { return !n.Open && len(n.DNS) == 0 && len(n.IP) == 0 }

// String lists the names as config writes them; an open-world CA's as
// "any DNS name except …, no IP address".
func (n Names) String() string {
	if n.Open {
		return "any DNS name except " + strings.Join(n.Exclude, ", ") + " (and the names below them), no IP address"
	}
	var out []string
	for _, d := range n.DNS {
		if strings.HasPrefix(d, ".") {
			d = "*" + d
		}
		out = append(out, d)
	}
	for _, p := range n.IP {
		if p.IsSingleIP() {
			out = append(out, p.Addr().String())
		} else {
			out = append(out, p.String())
		}
	}
	return strings.Join(out, ", ")
}

// Covers reports whether a certificate for host (a DNS name or IP
// literal, no port) is within n; for open names, only a PartnerName.
func (n Names) Covers(host string) bool {
	key, ip, err := normalizeHost(host)
	if err != nil {
		return false
	}
	if ip.IsValid() {
		return !n.Open && slices.ContainsFunc(n.IP, func(p netip.Prefix) bool { return p.Contains(ip) })
	}
	if n.excluded(key) {
		return false
	}
	if n.Open {
		return PartnerName(key)
	}
	return slices.ContainsFunc(n.DNS, func(c string) bool { return dnsMatch(key, c) })
}

// Missing is the part of other that n does not cover.
func (n Names) Missing(other Names) Names {
	var m Names
	for _, d := range other.DNS {
		if !slices.ContainsFunc(n.DNS, func(c string) bool { return dnsWithin(d, c) }) {
			m.DNS = append(m.DNS, d)
		}
	}
	for _, p := range other.IP {
		if !slices.ContainsFunc(n.IP, func(q netip.Prefix) bool { return q.Bits() <= p.Bits() && q.Contains(p.Addr()) }) {
			m.IP = append(m.IP, p)
		}
	}
	return m
}

// Union is every name of n and of other.
func (n Names) Union(other Names) Names {
	u := Names{DNS: slices.Concat(n.DNS, other.DNS), IP: slices.Concat(n.IP, other.IP)}
	u.sort()
	return u
}

// dnsMatch is RFC 5280's rule for one DNS name against one constraint, as
// crypto/x509 and OpenSSL apply it: a constraint with a leading dot
// permits names below it; one without permits the name and names below.
func dnsMatch(name, c string) bool {
	if strings.HasPrefix(c, ".") {
		return strings.HasSuffix(name, c)
	}
	return name == c || strings.HasSuffix(name, "."+c)
}

// dnsWithin reports whether constraint d permits nothing that c does not.
// Whatever permits a name permits the names below it, so a plain d needs
// only its own name permitted; ".name" needs every child of name, which c
// permits exactly when it is name or above it, with or without its dot.
func dnsWithin(d, c string) bool {
	if name, ok := strings.CutPrefix(d, "."); ok {
		base := strings.TrimPrefix(c, ".")
		return name == base || strings.HasSuffix(name, "."+base)
	}
	return dnsMatch(d, c)
}

// apply writes n into a CA template as critical name constraints. "No
// name of this type" is an excluded subtree that matches every name: an
// empty dNSName, or 0.0.0.0/0 and ::/0. Nothing is said of e-mail
// addresses and URIs: TLS clients match servers by DNS names and IPs
// only, and Java refuses a certificate whose constraints hold an empty
// e-mail address or URI.
func (n Names) apply(tmpl *x509.Certificate) {
	tmpl.PermittedDNSDomainsCritical = true
	if n.Open {
		tmpl.ExcludedDNSDomains = slices.Clone(n.Exclude)
		tmpl.ExcludedIPRanges = []*net.IPNet{ipNet(netip.MustParsePrefix("0.0.0.0/0")), ipNet(netip.MustParsePrefix("::/0"))}
		return
	}
	tmpl.PermittedDNSDomains = slices.Clone(n.DNS)
	if len(n.DNS) == 0 {
		tmpl.ExcludedDNSDomains = []string{""}
	}
	for _, p := range n.IP {
		tmpl.PermittedIPRanges = append(tmpl.PermittedIPRanges, ipNet(p))
	}
	if len(n.IP) == 0 {
		tmpl.ExcludedIPRanges = []*net.IPNet{ipNet(netip.MustParsePrefix("0.0.0.0/0")), ipNet(netip.MustParsePrefix("::/0"))}
	}
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// namesOf reads the name constraints of cert, and whether each name type
// is open: no permitted or excluded-everything constraint of that type.
func namesOf(cert *x509.Certificate) (n Names, dnsOpen, ipOpen bool) {
	n.DNS = slices.Clone(cert.PermittedDNSDomains)
	for _, r := range cert.PermittedIPRanges {
		a, _ := netip.AddrFromSlice(r.IP)
		ones, _ := r.Mask.Size()
		n.IP = append(n.IP, netip.PrefixFrom(a.Unmap(), ones))
	}
	ipAll := slices.ContainsFunc(cert.ExcludedIPRanges, func(r *net.IPNet) bool { ones, _ := r.Mask.Size(); return ones == 0 })
	dnsOpen = len(n.DNS) == 0 && !slices.Contains(cert.ExcludedDNSDomains, "")
	ipOpen = len(n.IP) == 0 && !ipAll
	for _, d := range cert.ExcludedDNSDomains {
		if d != "" {
			n.Exclude = append(n.Exclude, strings.ToLower(strings.TrimPrefix(d, ".")))
		}
	}
	// Open is the open-world CA's shape: any DNS name (less Exclude), no IP.
	n.Open = dnsOpen && ipAll && len(n.IP) == 0 && cert.PermittedDNSDomainsCritical
	n.sort()
	return n, dnsOpen, ipOpen
}

package egress

import "net/netip"

// Reasons returned by Classify and carried in DeniedError.Reason.
const (
	ReasonLoopback      = "loopback"
	ReasonPrivate       = "private"
	ReasonCGNAT         = "cgnat"
	ReasonLinkLocal     = "link-local"
	ReasonSiteLocal     = "site-local"
	ReasonUniqueLocal   = "unique-local"
	ReasonUnspecified   = "unspecified"
	ReasonMulticast     = "multicast"
	ReasonBroadcast     = "broadcast"
	ReasonCloudMetadata = "cloud-metadata"
	ReasonNAT64Local    = "nat64-local"
	ReasonReserved      = "reserved"
	ReasonDenied        = "denied" // matched Options.Deny
	ReasonSelf          = "self"   // hookpace's own listener (Options.Self)
)

type rule struct {
	prefix netip.Prefix
	reason string
}

// v4Rules is checked in order; the first match wins, so exact addresses
// come before the ranges that contain them.
//
// Documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24,
// 2001:db8::/32, 3fff::/20) are deliberately left dialable: they are not
// routed on the internet, so they reach nothing an ordinary public address
// could not, and tests across hookpace use them as stand-in public
// addresses. An operator who uses them internally can list them in Deny.
var v4Rules = []rule{
	{netip.MustParsePrefix("169.254.169.254/32"), ReasonCloudMetadata}, // AWS, GCP, Azure IMDS
	{netip.MustParsePrefix("168.63.129.16/32"), ReasonCloudMetadata},   // Azure wire server
	{netip.MustParsePrefix("192.0.0.192/32"), ReasonCloudMetadata},     // Oracle Cloud
	{netip.MustParsePrefix("0.0.0.0/32"), ReasonUnspecified},
	{netip.MustParsePrefix("0.0.0.0/8"), ReasonReserved}, // "this network"
	{netip.MustParsePrefix("127.0.0.0/8"), ReasonLoopback},
	{netip.MustParsePrefix("10.0.0.0/8"), ReasonPrivate},
	{netip.MustParsePrefix("172.16.0.0/12"), ReasonPrivate},
	{netip.MustParsePrefix("192.168.0.0/16"), ReasonPrivate},
	{netip.MustParsePrefix("100.64.0.0/10"), ReasonCGNAT},
	{netip.MustParsePrefix("169.254.0.0/16"), ReasonLinkLocal},
	{netip.MustParsePrefix("224.0.0.0/4"), ReasonMulticast},
	{netip.MustParsePrefix("255.255.255.255/32"), ReasonBroadcast},
	{netip.MustParsePrefix("240.0.0.0/4"), ReasonReserved},
	{netip.MustParsePrefix("192.0.0.0/24"), ReasonReserved},   // IETF protocol assignments
	{netip.MustParsePrefix("192.88.99.0/24"), ReasonReserved}, // deprecated 6to4 relay anycast
	{netip.MustParsePrefix("198.18.0.0/15"), ReasonReserved},  // benchmarking; used by VPNs as fake IPs
}

// v6Rules is checked after the IPv4-embedding forms have been handled.
var v6Rules = []rule{
	{netip.MustParsePrefix("fd00:ec2::254/128"), ReasonCloudMetadata}, // AWS IMDS over IPv6
	{netip.MustParsePrefix("64:ff9b:1::/48"), ReasonNAT64Local},       // RFC 8215: site-chosen embedding
	{netip.MustParsePrefix("ff00::/8"), ReasonMulticast},
	{netip.MustParsePrefix("fe80::/10"), ReasonLinkLocal},
	{netip.MustParsePrefix("fec0::/10"), ReasonSiteLocal},
	{netip.MustParsePrefix("fc00::/7"), ReasonUniqueLocal},
	{netip.MustParsePrefix("2001:2::/48"), ReasonReserved}, // benchmarking
}

var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
	teredo         = netip.MustParsePrefix("2001::/32")
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
)

// Classify returns "" when addr may be dialled under the default rules, or
// a short reason (one of the Reason constants) why it may not.
//
// IPv6 forms that carry an IPv4 address (IPv4-mapped ::ffff:a.b.c.d,
// IPv4-compatible ::a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16 and the
// Teredo client address in 2001::/32) are judged by the embedded IPv4
// address first, so ::ffff:127.0.0.1 is "loopback" and 64:ff9b::a01:203 is
// "private". IPv6 outside 2000::/3 that no other rule names is "reserved".
func Classify(addr netip.Addr) (reason string) {
	addr = addr.WithZone("")
	switch {
	case !addr.IsValid():
		return ReasonReserved
	case addr.Is4() || addr.Is4In6():
		return classify4(addr.Unmap())
	case addr == netip.IPv6Unspecified():
		return ReasonUnspecified
	case addr == netip.IPv6Loopback():
		return ReasonLoopback
	}
	if v4, ok := embedded4(addr); ok {
		if r := classify4(v4); r != "" {
			return r
		}
		if isV4Compatible(addr) {
			return ReasonReserved // deprecated (RFC 4291); nothing legitimate uses it
		}
		return ""
	}
	for _, r := range v6Rules {
		if r.prefix.Contains(addr) {
			return r.reason
		}
	}
	if !globalUnicast6.Contains(addr) {
		return ReasonReserved
	}
	return ""
}

func classify4(addr netip.Addr) string {
	for _, r := range v4Rules {
		if r.prefix.Contains(addr) {
			return r.reason
		}
	}
	return ""
}

// embedded4 returns the IPv4 address carried by an IPv6 address in one of
// the IPv4-compatible, NAT64 well-known, 6to4 or Teredo forms.
func embedded4(addr netip.Addr) (netip.Addr, bool) {
	if !addr.Is6() || addr.Is4In6() {
		return netip.Addr{}, false
	}
	b := addr.As16()
	switch {
	case isV4Compatible(addr), nat64WellKnown.Contains(addr):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(addr):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	case teredo.Contains(addr):
		// The Teredo client's address is stored inverted in the last 32 bits.
		return netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}), true
	}
	return netip.Addr{}, false
}

// isV4Compatible reports whether addr is in ::/96 (excluding :: and ::1).
func isV4Compatible(addr netip.Addr) bool {
	b := addr.As16()
	for _, x := range b[:12] {
		if x != 0 {
			return false
		}
	}
	return addr != netip.IPv6Unspecified() && addr != netip.IPv6Loopback()
}

// Package egress is hookpace's SSRF guard: it decides which addresses an
// outbound webhook may reach, and dials exactly the addresses it checked so
// that DNS rebinding between the check and the connection gets nowhere.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Options configures a Guard. The zero value applies the default rules only.
type Options struct {
	// Allow opens CIDRs ("127.0.0.0/8", "::1/128"), single IPs, or host
	// names ("hooks.internal.example", "*.corp.example") that the default
	// rules refuse. A host-name entry never opens a cloud-metadata address:
	// that needs a CIDR entry naming it.
	Allow []string
	// Deny refuses CIDRs, single IPs or host names; it wins over Allow and
	// the defaults. A CIDR also matches the IPv4 address embedded in a
	// NAT64, 6to4 or Teredo address.
	Deny []string
	// Self lists hookpace's own listener addresses ("127.0.0.1:8080",
	// "[::]:9090", ":9090", "localhost:8080"). Dialling one is refused even
	// when allowed. An unspecified or empty IP, or "localhost", means every
	// loopback and local interface address (as of New) with that port.
	Self []string
	// Apps are the inbound routes' apps ("127.0.0.1:3000",
	// "app.internal:3000"): each opens exactly that host and port, a
	// name by that name and an IP literal by that address (not another
	// name that resolves to it), as Allow would, but on no other port.
	Apps []string
	// Resolver looks up host names; nil means net.DefaultResolver.
	Resolver Resolver
}

// Resolver is the part of *net.Resolver the Guard uses.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DeniedError reports a destination refused by the guard. Callers map it to
// 403 Forbidden.
type DeniedError struct {
	Host   string     // host as asked for (name or IP literal)
	Addr   netip.Addr // the refused address
	Reason string     // one of the Reason constants
}

func (e *DeniedError) Error() string {
	if e.Host == "" || e.Host == e.Addr.String() {
		return fmt.Sprintf("egress to %s refused: %s", e.Addr, e.Reason)
	}
	return fmt.Sprintf("egress to %s (%s) refused: %s", e.Addr, e.Host, e.Reason)
}

// Refused says briefly what was refused and why ("127.0.0.1: loopback"),
// for dead-letter reasons.
func (e *DeniedError) Refused() string { return fmt.Sprintf("%s: %s", e.Addr, e.Reason) }

// IsDenied reports whether err is or wraps a *DeniedError.
func IsDenied(err error) bool {
	var d *DeniedError
	return errors.As(err, &d)
}

// Guard applies the egress policy. It is immutable and safe for concurrent use.
type Guard struct {
	allowNets, denyNets   []netip.Prefix
	allowHosts, denyHosts []hostPattern
	self                  []netip.AddrPort // an unspecified Addr means any local address
	apps                  []app
	localAddrs            map[netip.Addr]bool
	resolver              Resolver
	dial                  func(ctx context.Context, network, address string) (net.Conn, error)
}

// New validates opts and returns a Guard. An error names the bad entry.
func New(opts Options) (*Guard, error) {
	g := &Guard{resolver: opts.Resolver}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	var err error
	if g.allowNets, g.allowHosts, err = parseRules("allow", opts.Allow); err != nil {
		return nil, err
	}
	if g.denyNets, g.denyHosts, err = parseRules("deny", opts.Deny); err != nil {
		return nil, err
	}
	anyLocal := false
	for i, s := range opts.Self {
		ap, err := parseSelf(s)
		if err != nil {
			return nil, fmt.Errorf("egress: self[%d] %q: %w", i, s, err)
		}
		anyLocal = anyLocal || ap.Addr().IsUnspecified()
		g.self = append(g.self, ap)
	}
	for i, s := range opts.Apps {
		a, err := parseApp(s)
		if err != nil {
			return nil, fmt.Errorf("egress: apps[%d] %q: %w", i, s, err)
		}
		g.apps = append(g.apps, a)
	}
	if anyLocal {
		g.localAddrs = interfaceAddrs()
	}
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	g.dial = d.DialContext
	return g, nil
}

// Check resolves host (a name or IP literal, optionally in brackets, no
// port) once and returns the permitted addresses in resolver order. If none
// is permitted it returns a *DeniedError for the first refused address. A
// resolution failure is returned wrapped and is not a *DeniedError.
func (g *Guard) Check(ctx context.Context, host string) ([]netip.Addr, error) {
	return g.check(ctx, "ip", host, 0)
}

// CheckPort is Check for a destination port as well, so that hookpace's
// own listeners (Self) are refused at ingest as they are when dialling.
func (g *Guard) CheckPort(ctx context.Context, host string, port uint16) ([]netip.Addr, error) {
	return g.check(ctx, "ip", host, port)
}

// DialContext has the signature of http.Transport.DialContext. It checks
// the host of addr, then dials the checked addresses in order until one
// connects (each attempt limited to 10s, TCP keep-alive 30s); it never
// resolves the name again. Connecting to one of the Self listeners is refused.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var ipNet string
	switch network {
	case "tcp", "tcp4", "tcp6":
		ipNet = "ip" + strings.TrimPrefix(network, "tcp")
	default:
		return nil, fmt.Errorf("egress: dial %s %s: only tcp is supported", network, addr)
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("egress: dial %s: %w", addr, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return nil, fmt.Errorf("egress: dial %s: bad port %q", addr, portStr)
	}
	ips, err := g.check(ctx, ipNet, host, uint16(port))
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, ip := range ips {
		c, err := g.dial(ctx, network, netip.AddrPortFrom(ip, uint16(port)).String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 1 {
		return nil, fmt.Errorf("egress: dial %s: %w", addr, errs[0])
	}
	return nil, fmt.Errorf("egress: dial %s: %w", addr, dialErrors(errs))
}

// dialErrors keeps every attempt's error on one line (errors.Join would
// use newlines, which break log lines) while errors.Is/As still see them all.
type dialErrors []error

func (e dialErrors) Error() string {
	s := make([]string, len(e))
	for i, err := range e {
		s[i] = err.Error()
	}
	return strings.Join(s, "; ")
}

func (e dialErrors) Unwrap() []error { return e }

// check resolves host and filters the result; port 0 skips the Self check.
func (g *Guard) check(ctx context.Context, network, host string, port uint16) ([]netip.Addr, error) {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" {
		return nil, errors.New("egress: empty host")
	}
	var name string
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		if strings.Contains(host, ":") {
			return nil, fmt.Errorf("egress: host %q is neither a name nor an IP (a port is not allowed)", host)
		}
		name = normalizeName(host)
		if name == "invalid" || strings.HasSuffix(name, ".invalid") {
			// RFC 6761 §6.4: .invalid never resolves; say so at once,
			// whatever the resolver would do without a network.
			return nil, fmt.Errorf("egress: resolve %q: %w", host, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true})
		}
		if local(name) {
			// RFC 6761 §6.3: localhost names are loopback, whatever a
			// resolver would say, and need no query.
			addrs = loopback(network)
		} else if addrs, err = g.resolver.LookupNetIP(ctx, network, host); err != nil {
			return nil, fmt.Errorf("egress: resolve %q: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("egress: resolve %q: no addresses", host)
		}
	}
	var permitted []netip.Addr
	var first *DeniedError
	for i, a := range addrs {
		// A resolver may answer an IPv4 address in its IPv6-mapped form:
		// it is the IPv4 address, and is named so.
		a = a.Unmap()
		addrs[i] = a
		if reason := g.decide(name, a, port); reason != "" {
			if first == nil {
				first = &DeniedError{Host: host, Addr: a, Reason: reason}
			}
			continue
		}
		permitted = append(permitted, a)
	}
	if len(permitted) == 0 {
		return nil, first
	}
	return permitted, nil
}

// decide applies the decision order: Deny, Self, Allow, Classify.
func (g *Guard) decide(name string, addr netip.Addr, port uint16) string {
	a := addr.Unmap().WithZone("")
	if matchHost(g.denyHosts, name) || matchNet(g.denyNets, a) {
		return ReasonDenied
	}
	if v4, ok := embedded4(a); ok && matchNet(g.denyNets, v4) {
		return ReasonDenied
	}
	if port != 0 && g.isSelf(a, port) {
		return ReasonSelf
	}
	reason := Classify(a)
	if matchNet(g.allowNets, a) {
		return ""
	}
	if port != 0 && reason != ReasonCloudMetadata && g.isApp(name, a, port) {
		return ""
	}
	if reason != ReasonCloudMetadata && matchHost(g.allowHosts, name) {
		return ""
	}
	return reason
}

func (g *Guard) isSelf(a netip.Addr, port uint16) bool {
	for _, s := range g.self {
		if s.Port() != port {
			continue
		}
		if s.Addr() == a {
			return true
		}
		if s.Addr().IsUnspecified() && (a.IsLoopback() || a.IsUnspecified() || g.localAddrs[a]) {
			return true
		}
	}
	return false
}

// app is one of Options.Apps: a name, or an address when name is "".
type app struct {
	name string
	addr netip.Addr
	port uint16
}

func parseApp(s string) (app, error) {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return app{}, err
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil || port == 0 {
		return app{}, fmt.Errorf("bad port %q", p)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return app{addr: a.Unmap().WithZone(""), port: uint16(port)}, nil
	}
	return app{name: normalizeName(host), port: uint16(port)}, nil
}

// isApp reports whether name (or, for an IP literal, "" and a) on port
// is one of the apps.
func (g *Guard) isApp(name string, a netip.Addr, port uint16) bool {
	for _, ap := range g.apps {
		if ap.port == port && (ap.name != "" && ap.name == name || ap.name == "" && name == "" && ap.addr == a) {
			return true
		}
	}
	return false
}

func matchNet(nets []netip.Prefix, a netip.Addr) bool {
	for _, p := range nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// interfaceAddrs returns the host's interface addresses, for Self entries
// that listen on every address. On error the loopback check still applies.
func interfaceAddrs() map[netip.Addr]bool {
	m := make(map[netip.Addr]bool)
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		return m
	}
	for _, ia := range ifAddrs {
		if p, err := netip.ParsePrefix(ia.String()); err == nil {
			m[p.Addr().Unmap()] = true
		}
	}
	return m
}

// loopback is the loopback address of each family network admits ("ip",
// "ip4" or "ip6").
func loopback(network string) []netip.Addr {
	switch network {
	case "ip4":
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	case "ip6":
		return []netip.Addr{netip.IPv6Loopback()}
	}
	return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}
}

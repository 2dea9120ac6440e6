package proxy

import (
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/elazarl/goproxy"
	"github.com/hookpace/hookpace/egress"
	"github.com/hookpace/hookpace/mitm"
)

// onConnect applies the per-host CONNECT policy.
func (p *Proxy) onConnect(target string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
	start := time.Now()
	pol := p.policy.Load()
	r := ctx.Req
	reject := func(d decision) (*goproxy.ConnectAction, string) {
		p.record(r, start, target, 0, d)
		ctx.Resp = d.response(r, target)
		return &goproxy.ConnectAction{Action: goproxy.ConnectReject}, target
	}
	user, authorized := p.authorize(r, ctx, pol)
	if !authorized {
		return reject(unauthorized())
	}
	ctx.UserData = &ctxInfo{authorized: true, user: user}
	if d, refused := pol.appRefusal(&url.URL{Scheme: "https", Host: target}); refused {
		return reject(d)
	}
	t, d := p.connectPolicy(r, target, start)
	if t == nil {
		return reject(d)
	}
	if t.deny == "" && t.ca == nil {
		if d, ok := p.openTunnel(t); !ok {
			return reject(d)
		}
	}
	return p.sniffConnect(t), target
}

// openTunnel makes sure that a tunnel passed through can be opened before
// its CONNECT is answered 200. To port 443 (TLS for certain, spliced
// through) it dials the target, and the splice uses that connection. To
// another port, where plain HTTP inside is served by hookpace itself
// (spooled, and held while DNS fails), only a name that does not exist is
// refused. Either refusal is a 502 saying why (a 403 for egress).
func (p *Proxy) openTunnel(t *tunnel) (decision, bool) {
	u := &url.URL{Scheme: "https", Host: t.target}
	if destPort(u) == 443 {
		up, err := p.opts.Guard.DialContext(t.req.Context(), "tcp", t.target)
		if err != nil {
			return unreachable(t.target, err), false
		}
		t.up = up
		return decision{}, true
	}
	if _, err := p.opts.Guard.CheckPort(t.req.Context(), u.Hostname(), destPort(u)); err != nil {
		var dns *net.DNSError
		if errors.As(err, &dns) && dns.IsNotFound {
			return unreachable(t.target, err), false
		}
	}
	return decision{}, true
}

// unreachable is the answer to a CONNECT whose tunnel cannot be opened.
func unreachable(target string, err error) decision {
	if d, ok := refused(err); ok {
		return d
	}
	why := err.Error()
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		why = "the name does not resolve"
	}
	return decision{outcome: outcomeError, status: http.StatusBadGateway, reason: "connect: cannot open a tunnel to " + target + ": " + why}
}

// connectPolicy decides what a tunnel to target (host:port) becomes, for
// a CONNECT and for a captured TLS connection alike: a tunnel to serve
// (intercepted, spliced or refused in TLS), or, when t is nil, the
// refusal d to answer at once. r is the CONNECT, or the captured
// connection's stand-in for one.
func (p *Proxy) connectPolicy(r *http.Request, target string, start time.Time) (t *tunnel, d decision) {
	pol := p.policy.Load()
	u := &url.URL{Scheme: "https", Host: target}
	if err := CheckTarget(u); err != nil {
		return nil, badRequest(err.Error())
	}
	host := HostKey(u)
	mode := pol.Host(host).Connect
	ca := p.ca.Load()
	why := "connect: tunnel (not named in hosts; name it there to spool and pace it)"
	if mode == ConnectMITM {
		if ca != nil && ca.Covers(u.Hostname()) {
			// Counted once its first bytes say whether it is (tunnel.go).
			return &tunnel{req: r, target: target, host: host, ca: ca, start: start}, decision{}
		}
		// Never refuse what cannot be intercepted: the app's call goes
		// through as it would without hookpace, counted and warned of.
		mode = ConnectTunnel
		why = "connect: mitm, but no CA can vouch for it"
		var names mitm.Names
		if ca != nil {
			names, _ = ca.Names()
		}
		switch {
		case ca == nil:
		case names.Open:
			// An IP or a cluster-internal name: hookpace never mints a
			// leaf for it, and refusing it would break an app's own
			// in-cluster calls that merely share HTTPS_PROXY.
			why = "connect: mitm, but the open-world CA never vouches for an IP address or an excluded name (" +
				strings.Join(names.Exclude, ", ") + "): passed through as without hookpace"
		default:
			why = "connect: mitm, but it is outside the CA's names (" + names.String() + "): add it to mitm.hosts and reload; the CA is re-issued and apps must re-read the trust bundle"
		}
	}
	switch mode {
	case ConnectTunnel:
		if _, err := p.opts.Guard.CheckPort(r.Context(), u.Hostname(), destPort(u)); err != nil {
			if d, ok := refused(err); ok {
				return nil, d
			}
		}
		// A TLS tunnel is spliced through; plain HTTP inside is spooled (tunnel.go).
		return &tunnel{req: r, target: target, host: host, start: start, why: why}, decision{}
	default:
		deny := "CONNECT to " + host + " denied (connect: deny): hookpace cannot spool or pace an encrypted tunnel " +
			"it does not intercept. Name the host in hosts (connect: mitm, the default there) and trust hookpace's " +
			"CA in the app (hookpace ca bundle), or POST the http:// URL with upgrade_tls: true"
		if destPort(u) == 443 {
			// HTTPS for certain: refuse now, with a reason the client shows.
			p.countTunnel(r.Context(), host, TunnelRefused, "connect: deny")
			return nil, decision{outcome: outcomeRefused, status: http.StatusForbidden, reason: deny}
		}
		if _, err := p.opts.Guard.CheckPort(r.Context(), u.Hostname(), destPort(u)); err != nil && egress.IsDenied(err) {
			return nil, decision{outcome: outcomeRefused, status: http.StatusForbidden, reason: err.Error()}
		}
		// Plain HTTP inside is spooled like an absolute-form POST; TLS is refused.
		return &tunnel{req: r, target: target, host: host, deny: deny, start: start}, decision{}
	}
}

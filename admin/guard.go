package admin

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// The admin API is reachable by any web page open in a browser on the same
// machine: a page can POST a form to it, and a page whose name rebinds to
// 127.0.0.1 becomes same-origin with it. Guard keeps both out, before any
// handler runs:
//
//   - every request must name an allowed Host: a loopback name or address,
//     the address the connection came in on, a listener address, or a name
//     in admin.hosts (DNS rebinding always carries the attacker's name);
//   - with a token configured, every request but /healthz, /readyz and
//     /metrics must carry it (Authorization: Bearer, or the TokenCookie);
//   - a request that changes state must not come from another site (Origin,
//     Sec-Fetch-Site) and must carry what a cross-site form cannot send: an
//     X-Hookpace-Admin header or a JSON Content-Type (both need a CORS
//     preflight, which is never granted), or else the form token
//     (FormToken) as the form field FormTokenField.

// Header is the header the CLI sends with every request; any non-empty
// value marks a request as not from a web form.
const Header = "X-Hookpace-Admin"

// TokenCookie is the cookie that may carry the bearer token, for a browser
// showing the status page.
const TokenCookie = "hookpace_admin_token"

// FormTokenField is the form field that carries FormToken.
const FormTokenField = "csrf_token"

// Access is who may use the admin API.
type Access struct {
	Hosts []string // Host names served besides loopback and the listener addresses (admin.hosts)
	Addrs []string // the listener's own addresses, "host:port"
	Token string   // bearer token; "" = none required
}

// Guard checks requests against an Access; its methods are safe for
// concurrent use.
type Guard struct {
	hosts     map[string]bool
	addrs     map[netip.Addr]bool
	token     string
	formToken string
}

// NewGuard returns a Guard for a.
func NewGuard(a Access) *Guard {
	g := &Guard{hosts: map[string]bool{"localhost": true}, addrs: map[netip.Addr]bool{}, token: a.Token}
	for _, h := range a.Hosts {
		g.hosts[normHost(h)] = true
	}
	for _, s := range a.Addrs {
		host, _, err := net.SplitHostPort(s)
		if err != nil {
			host = s
		}
		if ip, err := netip.ParseAddr(host); err == nil && !ip.IsUnspecified() {
			g.addrs[ip.Unmap()] = true
		}
	}
	b := make([]byte, 24)
	rand.Read(b)
	g.formToken = hex.EncodeToString(b)
	return g
}

// TokenRequired reports whether a bearer token is configured.
func (g *Guard) TokenRequired() bool { return g.token != "" }

// FormToken is this process's anti-forgery token for HTML forms served by
// the admin listener: put it in a hidden field named FormTokenField. It
// changes at every start.
func (g *Guard) FormToken() string { return g.formToken }

// Wrap applies the Host, token and write checks to every request to next.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if reason := g.CheckHost(r); reason != "" {
			writeError(w, http.StatusForbidden, reason)
			return
		}
		if !openPath(r.URL.Path) && !g.Authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hookpace admin"`)
			writeError(w, http.StatusUnauthorized, "admin token required (admin.token_file; the CLI takes --token-file)")
			return
		}
		if !safeMethod(r.Method) {
			if reason := g.CheckWrite(r); reason != "" {
				writeError(w, http.StatusForbidden, reason)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// openPath: probes and metrics need no token (the Host check still holds).
func openPath(p string) bool {
	return p == "/healthz" || p == "/readyz" || p == "/metrics"
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// CheckHost returns why r's Host is not served, or "".
func (g *Guard) CheckHost(r *http.Request) string {
	if r.Host == "" {
		return "request without a Host header"
	}
	h := normHost(r.Host)
	if g.hosts[h] {
		return ""
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		ip = ip.Unmap()
		if ip.IsLoopback() || g.addrs[ip] {
			return ""
		}
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			if ap, err := netip.ParseAddrPort(la.String()); err == nil && ap.Addr().Unmap() == ip {
				return ""
			}
		}
	}
	return "host " + quote(r.Host) + " is not served by the admin API (add it to admin.hosts)"
}

// Authorized reports whether r carries the token, or no token is needed.
func (g *Guard) Authorized(r *http.Request) bool {
	if g.token == "" {
		return true
	}
	return g.TokenPresented(r)
}

// TokenPresented reports whether a token is configured and r carries it.
func (g *Guard) TokenPresented(r *http.Request) bool {
	if g.token == "" {
		return false
	}
	got := ""
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		got = strings.TrimSpace(a[7:])
	} else if c, err := r.Cookie(TokenCookie); err == nil {
		got = c.Value
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(g.token)) == 1
}

// CheckWrite returns why r may not change state, or "": it must not come
// from another site, and must carry the Header, a JSON Content-Type, or
// the form token.
func (g *Guard) CheckWrite(r *http.Request) string {
	if reason := CrossSite(r); reason != "" {
		return reason
	}
	if r.Header.Get(Header) != "" {
		return ""
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		return ""
	case "application/x-www-form-urlencoded", "multipart/form-data":
		r.Body = http.MaxBytesReader(nil, r.Body, 1<<20)
		if t := r.PostFormValue(FormTokenField); t != "" &&
			subtle.ConstantTimeCompare([]byte(t), []byte(g.formToken)) == 1 {
			return ""
		}
		return "form without a valid " + FormTokenField
	}
	return "state-changing request needs the " + Header + " header or Content-Type: application/json"
}

// CrossSite returns why r comes from another site, or "": Sec-Fetch-Site
// other than same-origin or none (typed by the user), or an Origin whose
// host is not r's Host.
func CrossSite(r *http.Request) string {
	switch s := r.Header.Get("Sec-Fetch-Site"); s {
	case "", "same-origin", "none":
	default:
		return "cross-site request refused (Sec-Fetch-Site: " + s + ")"
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return ""
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
		return "cross-site request refused (Origin: " + quote(o) + ")"
	}
	return ""
}

// normHost is the lower-case host of a Host header, without port,
// brackets or trailing dot.
func normHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

func quote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	return strconv.Quote(s)
}

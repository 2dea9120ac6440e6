package admin

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestGuard(t *testing.T) {
	g := NewGuard(Access{Hosts: []string{"Hookpace.OPS.svc"}, Addrs: []string{"10.1.2.3:9090", "0.0.0.0:9090"}, Token: "tok-0123456789abcdef"})
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := g.Wrap(ok)
	bearer := "Bearer tok-0123456789abcdef"
	for _, tc := range []struct {
		name, method, path, host string
		hdr                      map[string]string
		body                     string
		want                     int
	}{
		{"probe, loopback", "GET", "/healthz", "127.0.0.1:9090", nil, "", http.StatusTeapot},
		{"probe, localhost.", "GET", "/readyz", "LOCALHOST.:1", nil, "", http.StatusTeapot},
		{"probe, foreign host", "GET", "/healthz", "rebind.example:9090", nil, "", http.StatusForbidden},
		{"probe, listener address", "GET", "/healthz", "10.1.2.3", nil, "", http.StatusTeapot},
		{"probe, unspecified address is not a name", "GET", "/healthz", "0.0.0.0", nil, "", http.StatusForbidden},
		{"probe, admin.hosts", "GET", "/metrics", "hookpace.ops.svc:9090", nil, "", http.StatusTeapot},
		{"probe, other IP", "GET", "/healthz", "10.9.9.9", nil, "", http.StatusForbidden},
		{"no Host", "GET", "/healthz", "", nil, "", http.StatusForbidden},
		{"API without token", "GET", "/v1/hosts", "[::1]:9090", nil, "", http.StatusUnauthorized},
		{"API with token", "GET", "/v1/hosts", "[::1]:9090", map[string]string{"Authorization": bearer}, "", http.StatusTeapot},
		{"API with cookie", "GET", "/", "localhost", map[string]string{"Cookie": TokenCookie + "=tok-0123456789abcdef"}, "", http.StatusTeapot},
		{"write, header", "POST", "/v1/dead/purge", "localhost", map[string]string{"Authorization": bearer, Header: "1"}, "", http.StatusTeapot},
		{"write, JSON", "POST", "/v1/dead/purge", "localhost", map[string]string{"Authorization": bearer, "Content-Type": "application/json; charset=utf-8"}, "{}", http.StatusTeapot},
		{"write, bare", "POST", "/v1/dead/purge", "localhost", map[string]string{"Authorization": bearer}, "", http.StatusForbidden},
		{"write, text/plain", "POST", "/v1/dead/purge", "localhost", map[string]string{"Authorization": bearer, "Content-Type": "text/plain"}, "{}", http.StatusForbidden},
		{"write, form without token", "POST", "/pause", "localhost", map[string]string{"Authorization": bearer, "Content-Type": "application/x-www-form-urlencoded"}, "x=1", http.StatusForbidden},
		{"write, form with token", "POST", "/pause", "localhost", map[string]string{"Authorization": bearer, "Content-Type": "application/x-www-form-urlencoded"},
			FormTokenField + "=" + url.QueryEscape(g.FormToken()), http.StatusTeapot},
		{"write, form with token, cross-site", "POST", "/pause", "localhost", map[string]string{"Authorization": bearer, "Content-Type": "application/x-www-form-urlencoded", "Origin": "http://evil.example"},
			FormTokenField + "=" + url.QueryEscape(g.FormToken()), http.StatusForbidden},
		{"write, same origin", "POST", "/x", "localhost:9090", map[string]string{"Authorization": bearer, Header: "1", "Origin": "http://localhost:9090", "Sec-Fetch-Site": "same-origin"}, "", http.StatusTeapot},
		{"write, null origin", "POST", "/x", "localhost:9090", map[string]string{"Authorization": bearer, Header: "1", "Origin": "null"}, "", http.StatusForbidden},
		{"write, other port", "POST", "/x", "localhost:9090", map[string]string{"Authorization": bearer, Header: "1", "Origin": "http://localhost:3000"}, "", http.StatusForbidden},
		{"write, same-site", "POST", "/x", "localhost:9090", map[string]string{"Authorization": bearer, Header: "1", "Sec-Fetch-Site": "same-site"}, "", http.StatusForbidden},
	} {
		r := httptest.NewRequest(tc.method, "http://x"+tc.path, strings.NewReader(tc.body))
		r.Host = tc.host
		for k, v := range tc.hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, w.Code, w.Body, tc.want)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://p.example/hook":             "https://p.example/hook",
		"https://p.example/hook?sig=abc&t=1": "https://p.example/hook?sig=REDACTED&t=REDACTED",
		"https://u:pw@p.example/h?x":         "https://u:REDACTED@p.example/h?x=REDACTED",
		"http://p.example/h#frag":            "http://p.example/h#REDACTED",
		"http://p.example/%zz?token=secret":  "http://p.example/%zz?REDACTED",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHostKey(t *testing.T) {
	for in, want := range map[string]string{
		"partner.example":                   "partner.example",
		" Partner.Example. ":                "partner.example",
		"partner.example:8443":              "partner.example:8443",
		"https://partner.example:443/x?y=1": "partner.example",
		"http://partner.example:443/":       "partner.example:443",
		"http://127.0.0.1:9998/":            "127.0.0.1:9998",
		"http://[::1]:80/":                  "::1",
		"[::1]:8080":                        "[::1]:8080",
		"::1":                               "::1",
		"under_score.example":               "under_score.example",
	} {
		got, err := HostKey(in)
		if err != nil || got != want {
			t.Errorf("HostKey(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "a b", "a..b", "-a.example", "*.example", "ftp://x.example/", "x.example:0", "x.example:99999",
		"x.example:080", "http:///p", "file:///etc/passwd", "a/b", strings.Repeat("a", 64) + ".example", "é.example"} {
		if got, err := HostKey(in); err == nil {
			t.Errorf("HostKey(%q) = %q, want an error", in, got)
		}
	}
}

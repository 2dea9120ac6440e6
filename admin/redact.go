package admin

import (
	"net/http"
	"net/url"
	"strings"
)

// Redacted stands in for a hidden value.
const Redacted = "REDACTED"

// RedactURL hides what a webhook URL may carry as a secret: the value of
// every query parameter (names stay, so "?token=REDACTED" still says what
// was there) and a userinfo password. A URL that does not parse loses its
// whole query.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if i := strings.IndexByte(s, '?'); i >= 0 {
			return s[:i+1] + Redacted
		}
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), Redacted)
	}
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			name, _, _ := strings.Cut(p, "=")
			parts[i] = name + "=" + Redacted
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	if u.Fragment != "" {
		u.Fragment, u.RawFragment = Redacted, ""
	}
	return u.String()
}

// secretHeader reports whether a header's value is a credential.
func secretHeader(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "authorization", "proxy-authorization", "cookie":
		return true
	}
	for _, s := range []string{"token", "secret", "signature", "api-key", "apikey", "password"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// RedactHeader returns h with the values of credential headers replaced.
func RedactHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vs := range h {
		if secretHeader(k) {
			vs = []string{Redacted}
		}
		out[k] = vs
	}
	return out
}

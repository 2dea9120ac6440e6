package spool

import (
	"net/http"
	"net/url"
	"strings"
)

// The one rule for what of a webhook is hidden wherever it is shown: the
// journal writes its records so, and admin's views of dead letters, queues
// and journal entries apply it again to what they show.

// Redacted stands in for a hidden value, in the journal and in every
// view of a webhook (admin).
const Redacted = "REDACTED"

// RedactURL hides what a URL may carry as a secret: every query value, a
// password and a fragment. One that does not parse loses its query.
func RedactURL(s string) string {
	if !strings.ContainsAny(s, "?#@") {
		return s // nothing to hide: no need to parse it
	}
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

// SecretHeader reports whether a header's value may be a credential (of a
// request or an answer): cookies, anything about authorization, tokens, keys.
func SecretHeader(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "set-cookie", "set-cookie2", "cookie", "authorization", "proxy-authorization", "www-authenticate", "proxy-authenticate":
		return true
	}
	for _, s := range []string{"auth", "token", "secret", "signature", "key", "password", "session", "credential"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// RedactHeader copies h with the values of secret headers replaced.
func RedactHeader(h http.Header) http.Header {
	if len(h) == 0 {
		return nil
	}
	out := make(http.Header, len(h))
	for k, vs := range h {
		if SecretHeader(k) {
			vs = []string{Redacted}
		}
		out[k] = vs
	}
	return out
}

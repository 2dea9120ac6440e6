package credential

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Masked stands in for a credential's value found in what a partner or a
// token endpoint answered: an echo of the request hookpace sent.
const Masked = "[redacted]"

// minScrub is the shortest value scrubbed: a shorter one would mask
// ordinary words, and is no secret worth the name.
const minScrub = 4

// keptTokens is how many of the latest access tokens are scrubbed: an
// answer to an attempt may echo the token it went with after a newer one
// replaced it.
const keptTokens = 4

// Scrub returns s with every value of the host's credentials (its secret
// headers, its OAuth2 client secret and the latest access tokens) replaced
// by Masked, as written, URL-encoded, base64-encoded and JSON-escaped, and
// the client id and secret as an HTTP Basic credential. Whatever a partner
// or a token endpoint answered goes through it before it is stored or
// shown. Nil credentials scrub nothing.
func (c *Credentials) Scrub(s string) string {
	if c == nil || s == "" {
		return s
	}
	return scrub(s, c.secretForms())
}

// ScrubHeader copies h with its values scrubbed (Scrub).
func (c *Credentials) ScrubHeader(h http.Header) http.Header {
	if c == nil || len(h) == 0 {
		return h
	}
	forms := c.secretForms()
	if len(forms) == 0 {
		return h
	}
	out := make(http.Header, len(h))
	for k, vs := range h {
		vs2 := make([]string, len(vs))
		for i, v := range vs {
			vs2[i] = scrub(v, forms)
		}
		out[k] = vs2
	}
	return out
}

// secretForms are the strings Scrub replaces, longest first, so that a
// form containing another is replaced whole.
func (c *Credentials) secretForms() []string {
	var forms []string
	for _, hd := range c.headers {
		forms = appendForms(forms, hd.value.peek())
	}
	if t := c.token; t != nil && t.secret != nil {
		forms = append(forms, clientForms(t.cfg.ClientID, t.secret.peek())...)
	}
	return append(forms, c.tokens.forms()...)
}

// clientForms are the forms of an OAuth2 client secret, alone and as the
// HTTP Basic credential oauth2 sends (both parts query-escaped).
func clientForms(id, secret string) []string {
	if len(secret) < minScrub {
		return nil
	}
	return appendForms(appendForms(nil, secret), url.QueryEscape(id)+":"+url.QueryEscape(secret))
}

// appendForms appends v as it may appear in an echo: as it is,
// URL-encoded, base64-encoded and JSON-escaped.
func appendForms(forms []string, v string) []string {
	if len(v) < minScrub {
		return forms
	}
	forms = append(forms, v, url.QueryEscape(v), base64.StdEncoding.EncodeToString([]byte(v)),
		base64.RawURLEncoding.EncodeToString([]byte(v)))
	if b, err := json.Marshal(v); err == nil {
		forms = append(forms, string(b[1:len(b)-1]))
	}
	return forms
}

// scrub replaces every form in s with Masked.
func scrub(s string, forms []string) string {
	if len(forms) == 0 {
		return s
	}
	var found []string
	for _, f := range forms {
		if f != "" && strings.Contains(s, f) {
			found = append(found, f)
		}
	}
	if len(found) == 0 {
		return s
	}
	// strings.Replacer tries the olds in argument order at each position:
	// longest first, so that a form containing another goes whole.
	slices.SortFunc(found, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(found))
	for _, f := range found {
		pairs = append(pairs, f, Masked)
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

// recentTokens are the latest access tokens Apply set, for Scrub.
type recentTokens struct {
	mu   sync.Mutex
	toks []string // newest last, at most keptTokens
}

func (r *recentTokens) add(tok string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.toks); n > 0 && r.toks[n-1] == tok {
		return
	}
	r.toks = append(r.toks, tok)
	if len(r.toks) > keptTokens {
		r.toks = r.toks[len(r.toks)-keptTokens:]
	}
}

func (r *recentTokens) forms() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var forms []string
	for _, t := range r.toks {
		forms = appendForms(forms, t)
	}
	return forms
}

// peek is the secret's value as last read, without looking at its file
// again ("" before the first read).
func (s *secret) peek() string {
	if s == nil {
		return ""
	}
	if s.path == "" {
		return s.value
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.value
}

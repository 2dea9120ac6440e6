package spool

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync/atomic"
)

// The one rule for what of a webhook is hidden wherever it is shown: the
// journal writes its records so, and admin's views of dead letters, queues
// and journal entries, the operational events and the trace spans apply it
// again to what they show.

// Redacted stands in for a hidden value, in the journal and in every
// view of a webhook (admin).
const Redacted = "REDACTED"

// RedactURL hides what a URL may carry as a secret: every query value, a
// password, a fragment, and the path after the prefix a path rule shows
// (RedactPaths: the known incoming-webhook hosts, journal.redact_paths).
// One that does not parse loses its query.
func RedactURL(s string) string {
	rules := pathRules.Load()
	if !strings.ContainsAny(s, "?#@") && rules.match(hostOf(s)) == nil {
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
	for _, r := range rules.match(strings.ToLower(u.Hostname())) {
		if p, ok := r.hide(u.EscapedPath()); ok {
			u.RawPath = p
			if u.Path, err = url.PathUnescape(p); err != nil {
				u.Path, u.RawPath = p, ""
			}
			break
		}
	}
	return u.String()
}

// hostOf is the lower-cased host name of an absolute URL, without parsing
// it: "" when there is none.
func hostOf(s string) string {
	_, rest, ok := strings.Cut(s, "://")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	if i := strings.LastIndexByte(rest, ':'); i >= 0 && !strings.HasSuffix(rest, "]") {
		rest = rest[:i]
	}
	return strings.ToLower(rest)
}

// DefaultRedactPaths are the incoming-webhook hosts whose URL path is the
// secret: only the prefix each names is shown.
var DefaultRedactPaths = []string{
	"hooks.slack.com/services",
	"hooks.slack.com/workflows",
	"hooks.slack.com/triggers",
	"discord.com/api/webhooks",
	"*.discord.com/api/webhooks",
	"discordapp.com/api/webhooks",
	"*.webhook.office.com/*",
	"outlook.office.com/webhook",
	"outlook.office365.com/webhook",
}

// pathRule shows, of the URLs of a host, only the path's first segments
// that match prefix; what follows them is Redacted.
type pathRule struct {
	host   string   // exact, or with suffix: any name ending in it
	suffix bool     // host was "*.example.com": host holds ".example.com"
	prefix []string // path.Match patterns, one per segment
}

// ParseRedactPath reads a redact_paths pattern: a host (or *.domain for
// any name under it), then optionally the path segments shown, each a
// path.Match pattern ("hooks.example.com/in/*").
func ParseRedactPath(pattern string) (pathRule, error) {
	var r pathRule
	p := strings.TrimSpace(pattern)
	if strings.Contains(p, "://") {
		return r, fmt.Errorf("%q: want host/path without a scheme", pattern)
	}
	host, rest, _ := strings.Cut(p, "/")
	host = strings.ToLower(host)
	if s, ok := strings.CutPrefix(host, "*."); ok {
		r.suffix, host = true, "."+s
	}
	if host == "" || host == "." || strings.ContainsAny(host, "*?[]\\:@ ") {
		return r, fmt.Errorf("%q: want a host name or *.domain before the first /", pattern)
	}
	r.host = host
	for _, seg := range strings.Split(rest, "/") {
		if seg == "" {
			continue
		}
		if _, err := path.Match(seg, ""); err != nil {
			return r, fmt.Errorf("%q: path segment %q: %w", pattern, seg, err)
		}
		r.prefix = append(r.prefix, seg)
	}
	return r, nil
}

// hide returns p with what follows the rule's prefix Redacted, and whether
// the rule applies (p starts with segments matching the prefix, and has
// more).
func (r pathRule) hide(p string) (string, bool) {
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	if len(segs) <= len(r.prefix) || (len(segs) == len(r.prefix)+1 && segs[len(r.prefix)] == "") {
		return "", false
	}
	for i, pat := range r.prefix {
		if ok, _ := path.Match(pat, segs[i]); !ok {
			return "", false
		}
	}
	return "/" + strings.Join(append(segs[:len(r.prefix):len(r.prefix)], Redacted), "/"), true
}

// pathRuleSet is the path rules in force, by host.
type pathRuleSet struct {
	exact  map[string][]pathRule
	suffix []pathRule
}

// match returns the rules for host (lower-case), nil for none.
func (s *pathRuleSet) match(host string) []pathRule {
	if s == nil || host == "" {
		return nil
	}
	rules := s.exact[host]
	for _, r := range s.suffix {
		if strings.HasSuffix(host, r.host) {
			rules = append(rules[:len(rules):len(rules)], r)
		}
	}
	return rules
}

var pathRules atomic.Pointer[pathRuleSet]

func init() {
	if err := SetRedactPaths(nil); err != nil {
		panic(err) // DefaultRedactPaths is ours: a test keeps it valid
	}
}

// SetRedactPaths makes the path rules of RedactURL the defaults and
// patterns (journal.redact_paths), for every view from now on: a start
// and a reload set them.
func SetRedactPaths(patterns []string) error {
	s := &pathRuleSet{exact: map[string][]pathRule{}}
	for _, p := range append(append([]string(nil), DefaultRedactPaths...), patterns...) {
		r, err := ParseRedactPath(p)
		if err != nil {
			return err
		}
		if r.suffix {
			s.suffix = append(s.suffix, r)
		} else {
			s.exact[r.host] = append(s.exact[r.host], r)
		}
	}
	pathRules.Store(s)
	return nil
}

// How a stored header's value is shown.
type headerShow uint8

const (
	showNone  headerShow = iota // hidden: Redacted
	showWhole                   // said nothing secret: shown as it is
	showURL                     // a URL: shown through RedactURL
)

// shownHeaders are the headers whose values are shown whole: they describe
// the content, the pacing and hookpace's own lanes, never a credential.
// Every other header's value is hidden, whatever its name.
var shownHeaders = map[string]headerShow{
	"age": showWhole, "cache-control": showWhole, "connection": showWhole, "content-encoding": showWhole,
	"content-language": showWhole, "content-length": showWhole, "content-type": showWhole, "date": showWhole,
	"etag": showWhole, "expires": showWhole, "idempotency-key": showWhole, "last-modified": showWhole,
	"retry-after": showWhole, "server": showWhole, "traceparent": showWhole, "transfer-encoding": showWhole,
	"user-agent": showWhole, "vary": showWhole, "via": showWhole, "webhook-id": showWhole,
	"webhook-timestamp": showWhole, "x-request-id": showWhole,
	"location": showURL, "content-location": showURL,
}

// shownPrefixes are the families of headers shown whole.
var shownPrefixes = []string{"accept", "ratelimit", "x-ratelimit-", "hookpace-", "x-hookpace-"}

// commonShown holds headerShowOf's verdict on canonical names, worked out
// once: an entry is written for every webhook.
var commonShown = func() map[string]headerShow {
	m := map[string]headerShow{}
	for _, k := range []string{"Accept", "Accept-Encoding", "Authorization", "Content-Length", "Content-Type", "Cookie",
		"Traceparent", "Tracestate", "User-Agent", "X-Request-Id", "Idempotency-Key", "Webhook-Id", "Webhook-Timestamp",
		"Webhook-Signature", "X-Hub-Signature-256", "Location", "Retry-After", "Date", "Set-Cookie", "Server"} {
		m[k] = headerShowOf(k)
	}
	return m
}()

func headerShowOf(name string) headerShow {
	n := strings.ToLower(name)
	if s, ok := shownHeaders[n]; ok {
		return s
	}
	for _, p := range shownPrefixes {
		if strings.HasPrefix(n, p) {
			return showWhole
		}
	}
	return showNone
}

// ShownHeader reports whether a header's value is shown whole wherever a
// webhook or an answer is shown (the allow-list); Location and
// Content-Location are shown through RedactURL, every other is hidden.
func ShownHeader(name string) bool { return showOf(name) == showWhole }

func showOf(name string) headerShow {
	if s, ok := commonShown[name]; ok {
		return s
	}
	return headerShowOf(name)
}

// RedactHeaderValue is v as a header name's value is shown.
func RedactHeaderValue(name, v string) string {
	switch showOf(name) {
	case showWhole:
		return v
	case showURL:
		return RedactURL(v)
	}
	return Redacted
}

// RedactHeader copies h with every value not on the allow-list hidden.
func RedactHeader(h http.Header) http.Header {
	if len(h) == 0 {
		return nil
	}
	out := make(http.Header, len(h))
	for k, vs := range h {
		switch showOf(k) {
		case showNone:
			vs = []string{Redacted}
		case showURL:
			shown := make([]string, len(vs))
			for i, v := range vs {
				shown[i] = RedactURL(v)
			}
			vs = shown
		}
		out[k] = vs
	}
	return out
}

// minEcho is the shortest header value EchoForms looks for: a shorter
// one ("1", "yes") would mask words of every answer and hides nothing.
const minEcho = 8

// EchoForms are the strings that would show, in a partner's answer, the
// value of a header of h that the journal hides (not on the allow-list):
// each value as written and JSON-escaped, and a credential's part after
// its scheme ("Bearer TOKEN": TOKEN), longest first. A partner that echoes
// its request puts them in its answer; ScrubEcho takes them out before
// the answer is stored or shown.
func EchoForms(h http.Header) []string {
	var forms []string
	add := func(v string) {
		if len(v) < minEcho {
			return
		}
		forms = append(forms, v)
		if b, err := json.Marshal(v); err == nil && string(b[1:len(b)-1]) != v {
			forms = append(forms, string(b[1:len(b)-1]))
		}
	}
	for k, vs := range h {
		if showOf(k) != showNone {
			continue
		}
		for _, v := range vs {
			add(v)
			if i := strings.LastIndexByte(v, ' '); i >= 0 {
				add(v[i+1:])
			}
		}
	}
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(forms)
}

// ScrubEcho replaces every form (EchoForms) in s with Redacted.
func ScrubEcho(s string, forms []string) string {
	var pairs []string
	for _, f := range forms {
		if strings.Contains(s, f) {
			pairs = append(pairs, f, Redacted)
		}
	}
	if len(pairs) == 0 {
		return s
	}
	// strings.Replacer tries the olds in argument order at each position:
	// longest first (EchoForms' order), so that a form holding another
	// goes whole.
	return strings.NewReplacer(pairs...).Replace(s)
}

// ScrubEchoHeader copies h with its values scrubbed (ScrubEcho).
func ScrubEchoHeader(h http.Header, forms []string) http.Header {
	if len(forms) == 0 || len(h) == 0 {
		return h
	}
	out := make(http.Header, len(h))
	for k, vs := range h {
		vs2 := make([]string, len(vs))
		for i, v := range vs {
			vs2[i] = ScrubEcho(v, forms)
		}
		out[k] = vs2
	}
	return out
}

package proxy

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/hookpace/hookpace/sign"
	"github.com/hookpace/hookpace/webpath"
)

// Rule names for the webhooks that no webhooks rule made, as the ingest
// line's webhook_rule gives them.
const (
	RuleHTTP      = "spool.methods (http://)"
	RuleNamedHost = "hosts (a named host's " // + method + ")"
	RuleSignature = "webhook-signature header"
	RuleHostAll   = "hosts webhooks: all"
)

// classify says whether r (absolute-form) is a webhook, to be spooled
// and answered 202, and which rule made it one; anything else is an API
// call, forwarded synchronously with the partner's own answer.
//
// A host's webhooks: all or none decides first. Rules judge the path as
// the partner's server routes it (webpath): u's path is cleaned in place
// first, so the request is forwarded, or spooled, with the path judged. Then, with a webhooks
// block, its rules alone. Without one: an http:// request of
// spool.methods (as every version before), a request of spool.methods to
// a host named under hosts, and any request carrying a Standard Webhooks
// webhook-signature header.
func (pol *Policy) classify(r *http.Request) (rule string, webhook bool) {
	return pol.classifyAt(r, HostKey(r.URL))
}

// classifyAt is classify for r to host, its HostKey.
func (pol *Policy) classifyAt(r *http.Request, host string) (rule string, webhook bool) {
	hp := pol.Host(host)
	switch hp.Webhooks {
	case WebhooksAll:
		return RuleHostAll, pol.spools(r.Method)
	case WebhooksNone:
		return "", false
	}
	if pol.WebhookRulesSet {
		host := strings.ToLower(strings.TrimSuffix(r.URL.Hostname(), "."))
		fold, alt := judgedPath(r.URL)
		for _, w := range pol.Webhooks {
			if w.Matches(r.Method, host, fold, r.Header) || (alt != fold && w.Matches(r.Method, host, alt, r.Header)) {
				return w.Name, true
			}
		}
		return "", false
	}
	switch {
	case r.URL.Scheme == "http" && pol.spools(r.Method):
		return RuleHTTP, true
	case hp.Named && pol.spools(r.Method):
		return RuleNamedHost + r.Method + ")", true
	case len(r.Header.Values(sign.HeaderSignature)) > 0:
		return RuleSignature, true
	}
	return "", false
}

// judgedPath cleans u's path in place (webpath.Normalize) and returns it
// folded, and read with its encoded separators as separators (alt; fold
// when it has none). A path with a bad escape is left as it is and judged
// folded.
func judgedPath(u *url.URL) (fold, alt string) {
	p, err := webpath.Normalize(u.EscapedPath())
	if err != nil {
		fold = strings.ToLower(u.Path)
		return fold, fold
	}
	SetPath(u, p.Clean)
	return p.Fold(), p.Alt()
}

// SetPath sets u's path to escaped, an escaped path.
func SetPath(u *url.URL, escaped string) {
	if u.EscapedPath() == escaped {
		return
	}
	u.Path, _ = url.PathUnescape(escaped)
	u.RawPath = escaped
}

// WebhookRule says which requests are webhooks (spooled, 202, paced)
// rather than API calls (forwarded, the partner's own answer). A request
// matches a rule when it matches every field the rule sets.
type WebhookRule struct {
	Name    string   // "webhooks[0]": what the ingest line and check-config call it
	Host    string   // a host name, or "*." and a suffix (names below only); "": any host
	Methods []string // upper case; never empty (POST by default)
	Path    string   // a path.Match glob, "/**" at the end matching any rest, case-folded; "": any path
	Header  string   // a header that must be present (canonical form); "": none needed
}

// Matches reports whether a request (method, host name without port,
// URL path, header) matches r. The path is matched as given, against the
// rule's in lower case (webpath.Pattern): pass the cleaned, folded path
// (webpath.Path.Fold), which is what the partner's server routes.
func (r WebhookRule) Matches(method, host, urlPath string, h http.Header) bool {
	if !matchMethod(r.Methods, method) {
		return false
	}
	if r.Host != "" {
		if suffix, ok := strings.CutPrefix(r.Host, "*."); ok {
			if !strings.HasSuffix(host, "."+suffix) {
				return false
			}
		} else if host != r.Host {
			return false
		}
	}
	if r.Path != "" && !webpath.Match(webpath.Pattern(r.Path), urlPath) {
		return false
	}
	return r.Header == "" || len(h.Values(r.Header)) > 0
}

func matchMethod(ms []string, m string) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

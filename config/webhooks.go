package config

import (
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/hookpace/hookpace/hostname"
	"github.com/hookpace/hookpace/webpath"
)

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

// Host webhooks modes (a hosts entry's webhooks:).
const (
	WebhooksRules = "rules" // the webhooks rules decide (the default)
	WebhooksAll   = "all"   // every request of spool.methods to the host is a webhook
	WebhooksNone  = "none"  // no request to the host is a webhook: all are forwarded
)

// StandardWebhookSignature is the header of a Standard Webhooks
// signature: without a webhooks block, a request carrying it is a webhook.
const StandardWebhookSignature = "Webhook-Signature"

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

type rawWebhook struct {
	Host    opt[string]        `yaml:"host"`
	Methods opt[[]opt[string]] `yaml:"methods"`
	Path    opt[string]        `yaml:"path"`
	Header  opt[string]        `yaml:"header"`
}

// resolveWebhooks reads the webhooks block; set says it was there at all
// (an empty list too: then only hosts entries' webhooks: all make
// webhooks of intercepted requests).
func resolveWebhooks(p *problems, doc *docIndex, raw []rawWebhook, set bool, c *Config) {
	c.WebhookRulesSet = set
	for i, r := range raw {
		name := fmt.Sprintf("webhooks[%d]", i)
		w := WebhookRule{Name: name, Methods: []string{http.MethodPost}}
		field(p, name+".host", r.Host, &w.Host, checkRuleHost)
		w.Host = strings.ToLower(strings.TrimSuffix(w.Host, "."))
		list(p, name+".methods", r.Methods, &w.Methods, checkToken, true)
		for j, m := range w.Methods {
			w.Methods[j] = strings.ToUpper(m)
		}
		field(p, name+".path", r.Path, &w.Path, checkRulePath)
		field(p, name+".header", r.Header, &w.Header, checkToken)
		w.Header = http.CanonicalHeaderKey(w.Header)
		if !r.Host.Set && !r.Methods.Set && !r.Path.Set && !r.Header.Set {
			p.add(doc.line(name), name, "a rule needs at least one of host, methods, path, header")
		}
		c.Webhooks = append(c.Webhooks, w)
	}
}

func checkRuleHost(s string) error {
	_, err := hostname.Normalize(strings.TrimPrefix(s, "*."))
	return err
}

func checkRulePath(s string) error {
	if !strings.HasPrefix(s, "/") {
		return fmt.Errorf("want a path starting with /, got %q", s)
	}
	if _, err := path.Match(strings.TrimSuffix(s, "/**"), "/"); err != nil {
		return fmt.Errorf("malformed glob %q: %w", s, err)
	}
	return nil
}

// checkToken accepts an HTTP token (a method or a header name).
func checkToken(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	for _, c := range s {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c) {
			return fmt.Errorf("%q is not an HTTP token", s)
		}
	}
	return nil
}

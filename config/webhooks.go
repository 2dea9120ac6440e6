package config

import (
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/hookpace/hookpace/hostname"
)

// WebhookRule is one rule of the webhooks block, as checked: which
// requests are webhooks (spooled, 202, paced) rather than API calls
// (forwarded, the partner's own answer). The proxy matches requests
// against it (proxy.WebhookRule, which the server copies it into).
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

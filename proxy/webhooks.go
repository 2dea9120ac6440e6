package proxy

import (
	"net/http"
	"strings"

	"github.com/hookpace/hookpace/config"
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
// A host's webhooks: all or none decides first. Then, with a webhooks
// block, its rules alone. Without one: an http:// request of
// spool.methods (as every version before), a request of spool.methods to
// a host named under hosts, and any request carrying a Standard Webhooks
// webhook-signature header.
func (pol *Policy) classify(r *http.Request) (rule string, webhook bool) {
	hp := pol.Host(HostKey(r.URL))
	switch hp.Webhooks {
	case config.WebhooksAll:
		return RuleHostAll, pol.spools(r.Method)
	case config.WebhooksNone:
		return "", false
	}
	if pol.WebhookRulesSet {
		host := strings.ToLower(strings.TrimSuffix(r.URL.Hostname(), "."))
		for _, w := range pol.Webhooks {
			if w.Matches(r.Method, host, r.URL.Path, r.Header) {
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
	case len(r.Header.Values(config.StandardWebhookSignature)) > 0:
		return RuleSignature, true
	}
	return "", false
}

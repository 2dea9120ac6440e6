package proxy

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/hookpace/hookpace/config"
)

func classifyPolicy(t *testing.T, yaml string) *Policy {
	t.Helper()
	cfg, err := config.Parse("config.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	// The config's words as the server converts them (server.proxyPolicy).
	var rules []WebhookRule
	for _, w := range cfg.Webhooks {
		rules = append(rules, WebhookRule{Name: w.Name, Host: w.Host, Methods: w.Methods, Path: w.Path, Header: w.Header})
	}
	modes := map[string]WebhooksMode{config.WebhooksAll: WebhooksAll, config.WebhooksNone: WebhooksNone}
	connects := map[string]Connect{config.ConnectMITM: ConnectMITM, config.ConnectDeny: ConnectDeny}
	return &Policy{
		Methods:         cfg.Spool.Methods,
		Webhooks:        rules,
		WebhookRulesSet: cfg.WebhookRulesSet,
		Host: func(host string) HostPolicy {
			key, hc := cfg.Lookup(host)
			return HostPolicy{Named: key != "", Webhooks: modes[hc.Webhooks], Connect: connects[hc.Connect]}
		},
	}
}

// TestClassify: which requests are webhooks, and which rule says so,
// with and without a webhooks block.
func TestClassify(t *testing.T) {
	type req struct {
		method, url string
		header      string // a header present on the request
		rule        string // "": not a webhook
	}
	for _, tc := range []struct {
		name string
		yaml string
		reqs []req
	}{
		{"no block", "hosts:\n  hooks.partner.example: {}\n  inbox.example: {webhooks: all}\n  api.example: {webhooks: none}\n", []req{
			{"POST", "http://anything.example/x", "", RuleHTTP},
			{"GET", "http://anything.example/x", "", ""},
			{"POST", "https://hooks.partner.example/in", "", RuleNamedHost + "POST)"},
			{"POST", "https://api.stripe.example/v1/charges", "", ""},
			{"POST", "https://p1.test/", "webhook-signature", RuleSignature},
			{"PUT", "https://p1.test/", "Webhook-Signature", RuleSignature},
			{"GET", "https://hooks.partner.example/status", "", ""},
			{"POST", "https://inbox.example/", "", RuleHostAll},
			{"POST", "https://api.example/", "webhook-signature", ""},
			{"POST", "http://api.example/", "", ""},
		}},
		{"rules", `webhooks:
  - header: webhook-signature
  - host: "*.hooks.example"
    path: /in/**
  - host: slack.example
    methods: [POST, PUT]
    path: /services/*
hosts:
  named.example: {}
  inbox.example: {webhooks: all}
`, []req{
			{"POST", "https://p1.test/", "webhook-signature", "webhooks[0]"},
			{"POST", "https://api.test/v1/charges", "", ""},
			{"POST", "http://plain.example/", "", ""}, // the rules decide http:// too
			{"POST", "https://a.hooks.example/in/x/y", "", "webhooks[1]"},
			{"POST", "https://a.hooks.example/in", "", "webhooks[1]"},
			{"POST", "https://a.hooks.example/out", "", ""},
			{"POST", "https://hooks.example/in/x", "", ""}, // "*." is below only
			{"GET", "https://a.hooks.example/in/x", "", ""},
			{"PUT", "https://slack.example/services/T1", "", "webhooks[2]"},
			{"PUT", "https://slack.example/services/T1/B2", "", ""},
			{"POST", "https://named.example/", "", ""}, // with a block, being named is not enough
			{"POST", "https://inbox.example/", "", RuleHostAll},
		}},
	} {
		pol := classifyPolicy(t, tc.yaml)
		for _, rq := range tc.reqs {
			r := httptest.NewRequest(rq.method, rq.url, nil)
			if rq.header != "" {
				r.Header = http.Header{}
				r.Header.Set(rq.header, "v1,abc")
			}
			rule, ok := pol.classify(r)
			if rule != rq.rule || ok != (rq.rule != "") {
				t.Errorf("%s: %s %s (%s): rule %q webhook %v, want %q", tc.name, rq.method, rq.url, rq.header, rule, ok, rq.rule)
			}
		}
	}
}

// TestClassifyCleanedPath: rules judge the path the partner's server
// routes, and the request keeps the path that was judged.
func TestClassifyCleanedPath(t *testing.T) {
	pol := classifyPolicy(t, "webhooks:\n  - path: /hooks/**\n")
	for _, c := range []struct {
		target, sent string // sent: the path the request goes on with
		webhook      bool
	}{
		{"/hooks/a", "/hooks/a", true},
		{"/hooks/../api/charge", "/api/charge", false},
		{"/hooks/%2e%2e/api/charge", "/api/charge", false},
		{"//hooks/a", "/hooks/a", true},
		{"/./hooks/a", "/hooks/a", true},
		{"/Hooks/a", "/Hooks/a", true},
		{"/hooks;x/a", "/hooks/a", true},
		{"/%68ooks/a", "/hooks/a", true},
		{"/hooks%2Fa", "/hooks%2Fa", true}, // judged either way: a webhook if either is
		{"/api/charge", "/api/charge", false},
		{"/hooksx/a", "/hooksx/a", false},
	} {
		r := httptest.NewRequest("POST", "https://partner.test"+c.target, nil)
		_, ok := pol.classify(r)
		if ok != c.webhook || r.URL.EscapedPath() != c.sent {
			t.Errorf("POST %s: webhook %v, sent as %s; want %v, %s", c.target, ok, r.URL.EscapedPath(), c.webhook, c.sent)
		}
		if r.URL.String() != "https://partner.test"+c.sent {
			t.Errorf("POST %s: URL %s, want https://partner.test%s", c.target, r.URL, c.sent)
		}
	}
}

// TestAppRefusal: the proxy's doors refuse an inbound route's app by any
// spelling of its address, and nothing else.
func TestAppRefusal(t *testing.T) {
	local, err := NewApp("stripe", "http://127.0.0.1:3000")
	if err != nil {
		t.Fatal(err)
	}
	named, err := NewApp("named", "https://App.Internal.")
	if err != nil {
		t.Fatal(err)
	}
	pol := &Policy{Apps: []App{local, named}}
	for target, refused := range map[string]bool{
		"http://127.0.0.1:3000/webhooks/stripe":        true,
		"http://localhost:3000/":                       true,
		"http://LOCALHOST.:3000/":                      true,
		"http://app.localhost:3000/":                   true,
		"http://127.0.0.2:3000/":                       true,
		"http://[::1]:3000/":                           true,
		"http://[::ffff:127.0.0.1]:3000/":              true,
		"http://0.0.0.0:3000/":                         true,
		"http://[::]:3000/":                            true,
		"http://127.0.0.1:3001/":                       false,
		"http://127.0.0.1/":                            false,
		"http://10.0.0.1:3000/":                        false,
		"https://app.internal/hooks":                   true,
		"https://app.internal:443/hooks":               true,
		"http://app.internal/hooks":                    false,
		"https://other.internal/hooks":                 false,
		"https://partner.example:3000/webhooks/stripe": false,
	} {
		u, err := url.Parse(target)
		if err != nil {
			t.Fatal(err)
		}
		d, got := pol.appRefusal(u)
		if got != refused || (got && d.status != http.StatusForbidden) {
			t.Errorf("%s: refused %v (%d), want %v", target, got, d.status, refused)
		}
	}
}

// TestClassifyPatternSlash: a rule written with a trailing slash matches
// the cleaned path, which never has one.
func TestClassifyPatternSlash(t *testing.T) {
	pol := classifyPolicy(t, "webhooks:\n  - path: /Hooks/in/\n")
	for target, want := range map[string]bool{"/hooks/in": true, "/hooks/in/": true, "/HOOKS/in//": true, "/hooks/in/x": false} {
		if _, ok := pol.classify(httptest.NewRequest("POST", "https://p.test"+target, nil)); ok != want {
			t.Errorf("POST %s: webhook %v, want %v", target, ok, want)
		}
	}
}

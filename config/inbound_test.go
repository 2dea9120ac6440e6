package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestInboundRoutes(t *testing.T) {
	c := mustParse(t, `
hosts:
  "127.0.0.1:3000": {concurrency: auto}
inbound:
  - listen: 0.0.0.0:8081
    to: http://127.0.0.1:3000/
    paths: ["/webhooks/*", /stripe]
    verify: {scheme: stripe, secret_file: /run/secrets/stripe, tolerance: 10m}
    dedupe: {json: id}
    sign: {scheme: standard-webhooks, secret_file: /run/secrets/ours}
  - name: slack
    listen: 0.0.0.0:8082
    to: http://app.internal:3000
    answer: {status: 200, body: ""}
    verify: {scheme: hmac, secret_env: SECRET, header: X-Sig, algorithm: sha1, encoding: base64, prefix: "sha1="}
    dedupe: {header: X-Slack-Retry-Num}
    sync: [{json: type, value: url_verification}, {path: /slack/commands, method: post}]
`)
	if len(c.Inbound) != 2 {
		t.Fatalf("routes: %+v", c.Inbound)
	}
	r := c.Inbound[0]
	if r.Name != "inbound[0]" || r.To != "http://127.0.0.1:3000" || r.Host != "127.0.0.1:3000" ||
		!reflect.DeepEqual(r.Paths, []string{"/webhooks/*", "/stripe"}) || r.Answer.Status != 0 ||
		r.Dedupe != (InboundDedupe{JSON: "id"}) {
		t.Errorf("route 0: %+v", r)
	}
	if v := r.Verify; v == nil || v.Scheme != VerifyStripe || v.Secret.Name != "/run/secrets/stripe" || v.Tolerance.D() != 10*time.Minute {
		t.Errorf("route 0 verify: %+v", r.Verify)
	}
	if s := r.Sign; s == nil || s.Prefix != InboundSignPrefix || c.Hosts["127.0.0.1:3000"].Sign != nil || !c.Hosts["127.0.0.1:3000"].AutoConcurrency {
		t.Errorf("the route's sign %+v, the app's host: %+v", r.Sign, c.Hosts["127.0.0.1:3000"])
	}
	r = c.Inbound[1]
	if r.Name != "slack" || r.Answer != (InboundAnswer{Status: 200}) || r.Verify.Algorithm != "sha1" || r.Verify.Encoding != "base64" ||
		r.Verify.Prefix != "sha1=" || r.Verify.Tolerance.D() != 5*time.Minute ||
		!reflect.DeepEqual(r.Sync, []SyncRule{{JSON: "type", Value: "url_verification"}, {Path: "/slack/commands", Method: "POST"}}) {
		t.Errorf("route 1: %+v %+v", r, r.Verify)
	}
	if len(c.Egress.Allow) != 0 {
		t.Errorf("egress.allow opened for the apps' whole hosts: %v", c.Egress.Allow)
	}
	if r.Sign != nil {
		t.Errorf("route 1 signs: %+v", r.Sign)
	}
}

// TestInboundSignPerRoute: two routes to one app each sign with their own
// secret, a third signs nothing; the app's hosts entry signs nothing of
// theirs.
func TestInboundSignPerRoute(t *testing.T) {
	c := mustParse(t, `
hosts:
  "127.0.0.1:3000": {rate: 100/s}
inbound:
  - {name: stripe, listen: ":8081", to: "http://127.0.0.1:3000", sign: {scheme: standard-webhooks, secret_file: /s/a}}
  - {name: github, listen: ":8082", to: "http://127.0.0.1:3000", sign: {scheme: standard-webhooks, secret_file: /s/b}}
  - {name: plain, listen: ":8083", to: "http://127.0.0.1:3000"}
`)
	a, b, n := c.Inbound[0].Sign, c.Inbound[1].Sign, c.Inbound[2].Sign
	if a == nil || b == nil || a == b || a.Secrets[0].Name != "/s/a" || b.Secrets[0].Name != "/s/b" || n != nil {
		t.Errorf("signs: %+v %+v %+v", a, b, n)
	}
	if c.Hosts["127.0.0.1:3000"].Sign != nil {
		t.Errorf("the app's host signs: %+v", c.Hosts["127.0.0.1:3000"].Sign)
	}
}

func TestInboundWarnings(t *testing.T) {
	c := mustParse(t, `
inbound:
  - {listen: ":8081", to: "http://a:1", verify: {scheme: github, secret_file: f}, dedupe: {header: X-GitHub-Delivery}}
  - {listen: ":8082", to: "http://a:1", verify: {scheme: shopify, secret_file: f}, dedupe: {header: X-Shopify-Webhook-Id}}
  - {listen: ":8083", to: "http://a:1", verify: {scheme: stripe, secret_file: f}, dedupe: {json: id}}
  - {listen: ":8084", to: "http://a:1", verify: {scheme: standard-webhooks, secret_file: f}, dedupe: {header: webhook-id}}
  - {listen: ":8085", to: "http://a:1", dedupe: {json: id}}
  - {listen: ":8086", to: "http://a:1", paths: [/w], passthrough: [/w/test]}
`)
	w := c.InboundWarnings()
	if len(w) != 3 || !strings.Contains(w[0], "inbound[0].dedupe.header: X-GitHub-Delivery is not covered by github's signature") ||
		!strings.Contains(w[1], "inbound[1].dedupe.header: X-Shopify-Webhook-Id") || !strings.Contains(w[2], "inbound[4].dedupe: the route has no verify") {
		t.Errorf("warnings:\n%s", strings.Join(w, "\n"))
	}
	if !reflect.DeepEqual(c.Inbound[5].Passthrough, []string{"/w/test"}) {
		t.Errorf("passthrough: %v", c.Inbound[5].Passthrough)
	}
}

func TestInboundErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{`inbound: {listen: ":1"}`, "config.yaml:1: inbound: want a list of routes"},
		{"inbound:\n  - to: http://a:1", "config.yaml:2: inbound[0].listen: required"},
		{"inbound:\n  - listen: ':8081'", "config.yaml:2: inbound[0].to: required"},
		{"inbound:\n  - {listen: ':8081', to: 'ftp://a'}", "inbound[0].to: want an absolute http:// or https:// URL"},
		{"inbound:\n  - {listen: ':8081', to: 'http://a:1', colour: red}", `unknown field "colour" in inbound[0]`},
		{"inbound:\n  - {listen: ':8081', to: 'http://a:1', paths: [webhooks]}", "inbound[0].paths[0]: want a path starting with /"},
		{"inbound:\n  - {listen: ':8081', to: 'http://a:1', answer: {status: 401}}", "inbound[0].answer.status: want a 2xx status"},
		{"inbound:\n  - {listen: ':8081', to: 'http://a:1', verify: {scheme: gitlab, secret_file: f}}", "inbound[0].verify.scheme: must be one of"},
		{"inbound:\n  - {listen: ':8081', to: 'http://a:1', verify: {scheme: github}}", "inbound[0].verify: needs one secret"},
		{"inbound:\n  - {listen: ':8081', to: 'http://a:1', verify: {scheme: hmac, secret_file: f}}", "inbound[0].verify.header: required with scheme hmac"},
		{"inbound:\n  - {listen: ':8081', to: 'http://a:1', verify: {scheme: github, secret_file: f, header: X}}", "inbound[0].verify.header: only for scheme hmac"},
		{"inbound:\n  - {listen: ':8081', to: 'http://a:1', dedupe: {header: a, json: b}}", "inbound[0].dedupe: want one of header"},
		{"inbound:\n  - {listen: ':8081', to: 'http://a:1', sync: [{json: type}]}", "inbound[0].sync[0]: json and value go together"},
		{"inbound:\n  - {listen: ':8081', to: 'http://a:1', sync: [{}]}", "inbound[0].sync[0]: needs a condition"},
		{"inbound:\n  - {listen: ':8081', to: 'http://a:1'}\n  - {listen: ':8081', to: 'http://b:1'}", "inbound[1].listen: address :8081 is used by another route"},
		{"inbound:\n  - {listen: ':8081', to: 'http://a:1', cert_file: c}", "inbound[0]: set both cert_file and key_file"},
		{"inbound:\n  - {listen: ':8081', to: 'http://a:1', sign: {scheme: hmac-sha256, header: X-S, secret_file: f}}", "inbound[0].sign.scheme: an inbound route signs with standard-webhooks"},
	} {
		_, err := Parse("config.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\n got %v\nwant %s", tc.yaml, err, tc.want)
		}
	}
}

func TestInboundNeedsRestart(t *testing.T) {
	a := mustParse(t, "inbound:\n  - {listen: ':8081', to: 'http://a:1'}")
	b := mustParse(t, "inbound:\n  - {listen: ':8081', to: 'http://a:2'}")
	if got := RestartRequired(a, b); !strings.Contains(strings.Join(got, ","), "inbound") {
		t.Errorf("RestartRequired = %v", got)
	}
	if got := RestartRequired(a, mustParse(t, "inbound:\n  - {listen: ':8081', to: 'http://a:1'}")); len(got) != 0 {
		t.Errorf("same routes: RestartRequired = %v", got)
	}
}

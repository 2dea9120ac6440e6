package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/rewrite"
)

func TestRewriteConfig(t *testing.T) {
	c := mustParse(t, `
defaults:
  rewrite:
    headers:
      set: {X-Sent-By: hookpace}
      remove: [X-Debug]
hosts:
  partner.example:
    rewrite:
      headers: {set: {x-tenant: acme}, remove: [X-Internal-Trace]}
      json:
        drop: ["$.customer.email"]
        mask: ["$.card.number", "$.items[*].card"]
  inherits.example:
    rate: 5/s
  json-only.example:
    rewrite:
      json: {drop: ["$.a[0]"]}
  off.example:
    rewrite: {headers: {}}
`)
	want := &rewrite.Headers{Set: []rewrite.Header{{Name: "X-Sent-By", Value: "hookpace"}}, Remove: []string{"X-Debug"}}
	if got := c.Defaults.Rewrite.Headers; !reflect.DeepEqual(got, want) || c.Defaults.Rewrite.JSON != nil {
		t.Errorf("defaults: %+v %+v", got, c.Defaults.Rewrite.JSON)
	}
	p := c.Hosts["partner.example"].Rewrite
	if !reflect.DeepEqual(p.Headers, &rewrite.Headers{Set: []rewrite.Header{{Name: "X-Tenant", Value: "acme"}}, Remove: []string{"X-Internal-Trace"}}) {
		t.Errorf("partner headers replace defaults': %+v", p.Headers)
	}
	if p.JSON == nil || len(p.JSON.Drop) != 1 || p.JSON.Drop[0].String() != "$.customer.email" || len(p.JSON.Mask) != 2 || p.JSON.Mask[1].String() != "$.items[*].card" {
		t.Errorf("partner json: %+v", p.JSON)
	}
	if got := c.Hosts["inherits.example"].Rewrite; !reflect.DeepEqual(got.Headers, want) || got.JSON != nil {
		t.Errorf("a host without rewrite inherits defaults': %+v", got)
	}
	if got := c.Hosts["json-only.example"].Rewrite; !reflect.DeepEqual(got.Headers, want) || got.JSON == nil {
		t.Errorf("json alone keeps defaults' headers: %+v", got)
	}
	if got := c.Hosts["off.example"].Rewrite; got.Headers != nil {
		t.Errorf("headers: {} turns defaults' off: %+v", got.Headers)
	}
}

func TestRewriteConfigErrors(t *testing.T) {
	file := writeSecret(t, testWhsec)
	for _, tt := range []struct{ name, yaml, want string }{
		{"bad path", "hosts:\n  a.example:\n    rewrite:\n      json:\n        drop:\n          - $.ok\n          - customer.email\n", `config.yaml:7: hosts["a.example"].rewrite.json.drop[1]: path "customer.email" must start with $`},
		{"bad index", "defaults:\n  rewrite:\n    json: {mask: [\"$.a[x]\"]}\n", `config.yaml:3: defaults.rewrite.json.mask[0]: path "$.a[x]": [x] is neither`},
		{"path twice", "defaults:\n  rewrite:\n    json:\n      drop: [$.a]\n      mask: [$.a]\n", "config.yaml:5: defaults.rewrite.json.mask[0]: $.a is also in defaults.rewrite.json.drop[0]"},
		{"hop-by-hop", "defaults:\n  rewrite:\n    headers:\n      remove: [Connection]\n", "config.yaml:4: defaults.rewrite.headers.remove[0]: Connection is a connection's header"},
		{"hookpace's", "defaults:\n  rewrite:\n    headers:\n      set:\n        X-Hookpace-Id: x\n", "config.yaml:5: defaults.rewrite.headers.set.X-Hookpace-Id: X-Hookpace-Id is hookpace's own header"},
		{"hookpace's lane", "defaults:\n  rewrite:\n    headers:\n      remove: [hookpace-delay]\n", "Hookpace-Delay is hookpace's own header"},
		{"signed", "defaults:\n  sign: {scheme: standard-webhooks, secret_file: " + file + "}\n  rewrite:\n    headers:\n      set: {webhook-id: x}\n", "config.yaml:5: defaults.rewrite.headers.set.webhook-id: Webhook-Id is written by the host's signing"},
		{"signed, inherited", "defaults:\n  rewrite:\n    headers:\n      remove: [webhook-signature]\nhosts:\n  a.example:\n    sign: {scheme: standard-webhooks, secret_file: " + file + "}\n", `config.yaml:7: hosts["a.example"].sign: the rewrite.headers this host inherits (line 4) name Webhook-Signature`},
		{"set and remove", "defaults:\n  rewrite:\n    headers:\n      set: {X-A: b}\n      remove: [x-a]\n", "config.yaml:5: defaults.rewrite.headers.remove[0]: X-A is also in defaults.rewrite.headers.set.X-A"},
		{"value", "defaults:\n  rewrite:\n    headers:\n      set: {X-A: [1, 2]}\n", "defaults.rewrite.headers.set.X-A: want a value"},
		{"bad name", "defaults:\n  rewrite:\n    headers:\n      set: {'X A': b}\n", `config.yaml:4: defaults.rewrite.headers.set.X A: "X A" is not a valid HTTP header name`},
		{"unknown", "defaults:\n  rewrite:\n    body: {}\n", `config.yaml:3: unknown field "body" in defaults.rewrite`},
		{"unknown json", "defaults:\n  rewrite:\n    json: {keep: [$.a]}\n", `config.yaml:3: unknown field "keep" in defaults.rewrite.json`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("config.yaml", []byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v\nwant an error containing %q", err, tt.want)
			}
		})
	}
}

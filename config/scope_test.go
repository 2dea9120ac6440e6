package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestMITMScope: hookpace's own CA is open-world exactly when the config
// intercepts every host (defaults.connect: mitm) and lists no mitm.hosts;
// mitm.scope says so explicitly, and its errors name field and line.
func TestMITMScope(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		scope      string
		open       bool
	}{
		{"empty", "", ScopeListed, false},
		{"hosts only", "hosts:\n  a.example: {}\n", ScopeListed, false},
		{"defaults mitm", "defaults: {connect: mitm}\n", ScopeOpen, true},
		{"defaults mitm with mitm.hosts", "defaults: {connect: mitm}\nmitm: {hosts: [a.example]}\n", ScopeListed, false},
		{"explicit listed", "defaults: {connect: mitm}\nmitm: {scope: listed}\n", ScopeListed, false},
		{"explicit open", "mitm: {scope: open}\nhosts:\n  a.example: {}\n", ScopeOpen, true},
		{"exclude", "defaults: {connect: mitm}\nmitm: {exclude: [corp.example, \"*.vpn.example\"]}\n", ScopeOpen, true},
	} {
		c := mustParse(t, tc.yaml)
		if c.MITM.Scope != tc.scope || c.MITMOpen() != tc.open {
			t.Errorf("%s: scope %q open %v, want %q %v", tc.name, c.MITM.Scope, c.MITMOpen(), tc.scope, tc.open)
		}
	}
	c := mustParse(t, "defaults: {connect: mitm}\nmitm: {exclude: [corp.example]}\n")
	if !reflect.DeepEqual(c.MITM.Exclude, []string{"corp.example"}) {
		t.Errorf("mitm.exclude = %q", c.MITM.Exclude)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"mitm:\n  scope: everything\n", `config.yaml:2: mitm.scope: must be one of open, listed, got "everything"`},
		{"mitm:\n  hosts: [a.example]\n  scope: open\n", `config.yaml:3: mitm.scope: open: the CA vouches for any name; mitm.hosts lists`},
		{"mitm:\n  ca_cert: a.pem\n  ca_key: b.pem\n  scope: open\n", `config.yaml:4: mitm.scope: open applies to hookpace's own CA`},
		{"defaults: {connect: mitm}\nmitm:\n  exclude: [10.0.0.0/8]\n", `config.yaml:3: mitm.exclude[0]: "10.0.0.0/8": an IP range`},
		{"defaults: {connect: mitm}\nmitm:\n  exclude: [\"bad name\"]\n", `config.yaml:3: mitm.exclude[0]: "bad name"`},
		{"mitm:\n  exclude: [corp.example]\n", `config.yaml:2: mitm.exclude: applies to the open-world CA (mitm.scope: open) only`},
	} {
		_, err := Parse("config.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// TestWebhookRulesConfig: the webhooks block's rules, their defaults, and
// errors that name field and line.
func TestWebhookRulesConfig(t *testing.T) {
	c := mustParse(t, "webhooks:\n  - header: webhook-signature\n  - host: \"*.Hooks.Example\"\n    methods: [post, put]\n    path: /in/**\nhosts:\n  a.example: {webhooks: all}\n")
	if !c.WebhookRulesSet || len(c.Webhooks) != 2 {
		t.Fatalf("webhooks: set %v, %+v", c.WebhookRulesSet, c.Webhooks)
	}
	want := []WebhookRule{
		{Name: "webhooks[0]", Methods: []string{"POST"}, Header: "Webhook-Signature"},
		{Name: "webhooks[1]", Host: "*.hooks.example", Methods: []string{"POST", "PUT"}, Path: "/in/**"},
	}
	if !reflect.DeepEqual(c.Webhooks, want) {
		t.Errorf("webhooks = %+v, want %+v", c.Webhooks, want)
	}
	if c.Hosts["a.example"].Webhooks != WebhooksAll {
		t.Errorf("hosts webhooks = %q", c.Hosts["a.example"].Webhooks)
	}
	if c := mustParse(t, ""); c.WebhookRulesSet {
		t.Error("no block, but WebhookRulesSet")
	}
	for _, tc := range []struct{ yaml, want string }{
		{"webhooks:\n  - {}\n", `config.yaml:2: webhooks[0]: a rule needs at least one of host, methods, path, header`},
		{"webhooks:\n  - header: webhook-signature\n  - path: in/*\n", `config.yaml:3: webhooks[1].path: want a path starting with /`},
		{"webhooks:\n  - path: \"/[\"\n", `config.yaml:2: webhooks[0].path: malformed glob`},
		{"webhooks:\n  - host: \"bad host\"\n", `config.yaml:2: webhooks[0].host:`},
		{"webhooks:\n  - methods: []\n", `config.yaml:2: webhooks[0].methods: must not be empty`},
		{"webhooks:\n  - header: \"a b\"\n", `config.yaml:2: webhooks[0].header: "a b" is not an HTTP token`},
		{"webhooks:\n  - hedaer: x\n", `config.yaml:2: unknown field "hedaer"`},
		{"hosts:\n  a.example:\n    webhooks: some\n", `config.yaml:3: hosts["a.example"].webhooks: must be one of rules, all, none, got "some"`},
	} {
		_, err := Parse("config.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

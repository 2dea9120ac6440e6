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

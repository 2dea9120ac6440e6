package config

import (
	"strings"
	"testing"
)

// ":80" and ":443", and the spellings of one IPv6 address, name
// the key they would without them: two such keys are duplicates.
func TestHostKeySpellingsAreDuplicates(t *testing.T) {
	for _, tc := range []struct{ a, b, key string }{
		{"partner.example", "partner.example:80", "partner.example"},
		{"partner.example:443", "Partner.Example.", "partner.example"},
		{"*.b.example", "*.b.example:443", "*.b.example"},
		{"[::1]:8443", "[0:0::1]:8443", "[::1]:8443"},
		{"::1", "[0:0::1]:80", "::1"},
		{"2001:db8::1", "2001:DB8:0:0::1", "2001:db8::1"},
		{"10.0.0.5", "10.0.0.5:80", "10.0.0.5"},
	} {
		_, err := Parse("config.yaml", []byte("hosts:\n  \""+tc.a+"\": {}\n  \""+tc.b+"\": {}\n"))
		if err == nil || !strings.Contains(err.Error(), "config.yaml:3: hosts: duplicate host key") {
			t.Errorf("%q and %q: %v, want a duplicate at line 3", tc.a, tc.b, err)
		}
		c, err := Parse("config.yaml", []byte("hosts:\n  \""+tc.b+"\": {}\n"))
		if err != nil {
			t.Fatalf("%q alone: %v", tc.b, err)
		}
		if _, ok := c.Hosts[tc.key]; !ok || len(c.Hosts) != 1 {
			t.Errorf("%q is keyed %v, want %q", tc.b, c.Hosts, tc.key)
		}
	}
	// A port that is not a default stays, and is another key.
	if _, err := Parse("config.yaml", []byte("hosts:\n  partner.example: {}\n  \"partner.example:8443\": {}\n")); err != nil {
		t.Errorf("a host and its :8443: %v", err)
	}
}

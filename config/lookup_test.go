package config

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestLookup(t *testing.T) {
	c := mustParse(t, `
hosts:
  api.example: {burst: 1}
  api.example:8443: {burst: 2}
  "*.slack.example": {burst: 3}
  "*.eu.slack.example": {burst: 4}
  "*.slack.example:8443": {burst: 5}
  exact.slack.example: {burst: 6}
  10.0.0.5: {burst: 7}
  "[2001:db8::1]:8443": {burst: 8}
  "2001:db8::2": {burst: 9}
`)
	tests := []struct {
		hostport string
		key      string
	}{
		{"api.example", "api.example"},
		{"api.example:8443", "api.example:8443"},
		{"api.example:9000", "api.example"}, // port stripped
		{"x.api.example", ""},               // no wildcard for api.example
		{"a.slack.example", "*.slack.example"},
		{"a.b.slack.example", "*.slack.example"},
		{"slack.example", ""}, // the wildcard needs at least one more label
		{"a.eu.slack.example", "*.eu.slack.example"},
		{"a.eu.slack.example:8443", "*.eu.slack.example"}, // longest suffix beats port
		{"a.slack.example:8443", "*.slack.example:8443"},
		{"a.slack.example:9999", "*.slack.example"},
		{"exact.slack.example", "exact.slack.example"}, // exact beats wildcard
		{"exact.slack.example:8443", "exact.slack.example"},
		{"10.0.0.5", "10.0.0.5"},
		{"10.0.0.5:8080", "10.0.0.5"},
		{"[2001:db8::1]:8443", "[2001:db8::1]:8443"},
		{"[2001:db8::2]:8443", "2001:db8::2"},
		{"[2001:db8::2]", "2001:db8::2"},
		{"other.example", ""},
		{"", ""},
	}
	for _, tt := range tests {
		key, hc := c.Lookup(tt.hostport)
		want := c.Defaults
		if tt.key != "" {
			want = c.Hosts[tt.key]
		}
		if key != tt.key || hc.Burst != want.Burst {
			t.Errorf("Lookup(%q) = %q (burst %d), want %q (burst %d)", tt.hostport, key, hc.Burst, tt.key, want.Burst)
		}
	}

	// A Config assembled by hand (no precomputed index) still works.
	hand := &Config{Defaults: c.Defaults, Hosts: c.Hosts}
	if key, _ := hand.Lookup("a.b.slack.example"); key != "*.slack.example" {
		t.Errorf("hand-built Lookup = %q", key)
	}
}

func TestLookupManyHosts(t *testing.T) {
	const n = 10_000
	var b strings.Builder
	b.WriteString("hosts:\n")
	for i := range n {
		fmt.Fprintf(&b, "  h%d.example: {rate: %d/m}\n", i, i+1)
		fmt.Fprintf(&b, "  \"*.w%d.example\": {rate: %d/h}\n", i, i+1)
	}
	c := mustParse(t, b.String())
	if len(c.Hosts) != 2*n {
		t.Fatalf("len(Hosts) = %d", len(c.Hosts))
	}
	for i := 0; i < n; i += 97 {
		if key, hc := c.Lookup(fmt.Sprintf("h%d.example", i)); key != fmt.Sprintf("h%d.example", i) || hc.Rate != (Rate{float64(i + 1), time.Minute}) {
			t.Fatalf("Lookup h%d = %q %v", i, key, hc.Rate)
		}
		if key, hc := c.Lookup(fmt.Sprintf("a.b.w%d.example:444", i)); key != fmt.Sprintf("*.w%d.example", i) || hc.Rate.Per != time.Hour {
			t.Fatalf("Lookup w%d = %q %v", i, key, hc.Rate)
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		c.Lookup("x.y.w5000.example:8443")
		c.Lookup("h9999.example")
		c.Lookup("nothing.here.example")
	})
	if allocs != 0 {
		t.Errorf("Lookup allocates %v times per call, want 0", allocs)
	}
}

func BenchmarkLookup(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("hosts:\n")
	for i := range 10_000 {
		fmt.Fprintf(&sb, "  h%d.example: {}\n  \"*.w%d.example\": {}\n", i, i)
	}
	c, err := Parse("bench.yaml", []byte(sb.String()))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		c.Lookup("a.b.c.w777.example:8443")
	}
}

func TestCheckHostKey(t *testing.T) {
	tests := []struct {
		key string
		ok  bool
	}{
		{"api.example", true},
		{"api.example:8443", true},
		{"*.slack.example", true},
		{"*.slack.example:8443", true},
		{"localhost", true},
		{"10.0.0.5", true},
		{"10.0.0.5:80", true},
		{"2001:db8::1", true},
		{"[2001:db8::1]:443", true},
		{"under_score.example", true},
		{"[2001:db8::1]", false},
		{"https://api.example", false},
		{"api.example/hooks", false},
		{"api.example:", false},
		{"api.example:0", false},
		{"api.example:http", false},
		{"*.", false},
		{"*", false},
		{"a.*.example", false},
		{"-bad.example", false},
		{"a..example", false},
		{"", false},
	}
	for _, tt := range tests {
		if err := checkHostKey(tt.key); (err == nil) != tt.ok {
			t.Errorf("checkHostKey(%q) = %v, want ok=%v", tt.key, err, tt.ok)
		}
	}
}

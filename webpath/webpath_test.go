package webpath

import (
	"errors"
	"testing"
)

func TestNormalize(t *testing.T) {
	for _, c := range []struct {
		in, clean string
		seps      bool
	}{
		{"", "/", false},
		{"/", "/", false},
		{"/webhooks/stripe", "/webhooks/stripe", false},
		{"/webhooks/stripe/", "/webhooks/stripe", false},
		{"/webhooks/stripe;x", "/webhooks/stripe", false},
		{"/webhooks;a=1/stripe;b", "/webhooks/stripe", false},
		{"//webhooks/stripe", "/webhooks/stripe", false},
		{"/webhooks//stripe", "/webhooks/stripe", false},
		{"/Webhooks/stripe", "/Webhooks/stripe", false},
		{"/webhooks/./stripe", "/webhooks/stripe", false},
		{"/x/../webhooks/stripe", "/webhooks/stripe", false},
		{"/../../webhooks/stripe", "/webhooks/stripe", false},
		{"/hooks/../api/charge", "/api/charge", false},
		{"/hooks/%2E%2E/api/charge", "/api/charge", false},
		{"/%2e/hooks/a", "/hooks/a", false},
		{"/%77ebhooks/%73tripe", "/webhooks/stripe", false},
		{"/a%7Eb%2D%5F", "/a~b-_", false},
		{"/a%20b%3bc", "/a%20b%3Bc", false},
		{"/webhooks/stripe%2F", "/webhooks/stripe%2F", true},
		{"/webhooks%2fstripe", "/webhooks%2Fstripe", true},
		{"/webhooks%5Cstripe", "/webhooks%5Cstripe", true},
		{`/webhooks\stripe`, `/webhooks\stripe`, true},
		{"/a;x/../b", "/b", false},
		{"*", "*", false},
	} {
		p, err := Normalize(c.in)
		if err != nil {
			t.Errorf("Normalize(%q): %v", c.in, err)
			continue
		}
		if p.Clean != c.clean || p.Separators() != c.seps {
			t.Errorf("Normalize(%q) = %q, separators %v; want %q, %v", c.in, p.Clean, p.Separators(), c.clean, c.seps)
		}
		again, err := Normalize(p.Clean)
		if err != nil || again != p {
			t.Errorf("Normalize(Normalize(%q).Clean) = %+v, %v; want %+v (idempotent)", c.in, again, err, p)
		}
	}
	for _, in := range []string{"/a%", "/a%2", "/a%zz", "/%G0/b"} {
		if _, err := Normalize(in); !errors.Is(err, ErrEscape) {
			t.Errorf("Normalize(%q) error = %v, want ErrEscape", in, err)
		}
	}
}

func TestUnderAndMatch(t *testing.T) {
	for _, c := range []struct {
		path, pattern string
		under, match  bool
	}{
		{"/webhooks/stripe", "/webhooks/stripe", true, true},
		{"/webhooks/stripe/", "/webhooks/stripe", true, true},
		{"/webhooks/stripe;x", "/webhooks/stripe", true, true},
		{"//webhooks/stripe", "/webhooks/stripe", true, true},
		{"/webhooks//stripe", "/webhooks/stripe", true, true},
		{"/Webhooks/stripe", "/webhooks/stripe", true, true},
		{"/webhooks/./stripe", "/webhooks/stripe", true, true},
		{"/x/../webhooks/stripe", "/webhooks/stripe", true, true},
		{"/webhooks/stripe%2F", "/webhooks/stripe", true, true},
		{"/webhooks/stripe%2Fx", "/webhooks/stripe", true, false},
		{"/webhooks%2Fstripe", "/webhooks/stripe", true, true},
		{"/webhooks/stripe/x", "/webhooks/stripe", true, false},
		{"/webhooks/stripex", "/webhooks/stripe", false, false},
		{"/webhooks", "/webhooks/stripe", false, false},
		{"/health", "/webhooks/stripe", false, false},
		{"/WEBHOOKS/GitHub", "/webhooks/*", true, true},
		{"/webhooks/github/x", "/webhooks/*", true, false},
		{"/anything", "/", true, false},
		{"/hooks/../api/charge", "/hooks/**", false, false},
		{"//hooks/a", "/hooks/**", true, true},
		{"/./hooks/a", "/hooks/**", true, true},
		{"/Hooks/a", "/hooks/**", true, true},
		{"/hooks;x/a", "/hooks/**", true, true},
		{"/hooksx/a", "/hooks/**", false, false},
		{"/webhooks", "/webhooks/", true, true},
		{"/webhooks/x", "/webhooks/", true, false},
		{"/x", "//", true, false},
	} {
		p, err := Normalize(c.path)
		if err != nil {
			t.Fatalf("Normalize(%q): %v", c.path, err)
		}
		if got := p.Under(c.pattern); got != c.under {
			t.Errorf("%q Under(%q) = %v, want %v", c.path, c.pattern, got, c.under)
		}
		if got := p.Match(c.pattern); got != c.match {
			t.Errorf("%q Match(%q) = %v, want %v", c.path, c.pattern, got, c.match)
		}
	}
}

func BenchmarkNormalize(b *testing.B) {
	for _, in := range []string{"/webhooks/stripe", "/x/../Webhooks//stripe;v=1/%2F"} {
		b.Run(in, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, _ := Normalize(in)
				if !p.Under("/webhooks/stripe") {
					b.Fatal("no match")
				}
			}
		})
	}
}

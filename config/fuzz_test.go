package config

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/egress"
	"github.com/hookpace/hookpace/pacer"
)

// FuzzParse feeds any bytes to the config decoder. It must never panic;
// what it refuses is a list of FieldErrors naming the file; and what it
// accepts, run accepts too: the egress guard builds from it, every host key
// is a fixed point of normalizeHostKey and finds itself, and the limits are
// within the pacer's bounds. The committed corpus is in
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("../config.example.yaml"); err == nil {
		f.Add(b)
	}
	for _, s := range []string{
		"", "hosts:\n  a.example: {rate: 5/s, burst: 1}\n  \"*.b.example:8443\": {connect: tunnel}\n",
		"egress: {allow: [\"10.0.0.0/8\", \"*.corp.example\", \"::1\"], deny: [\"x.example.\"]}\n",
		"defaults: &d {rate: 1e308/s}\nhosts: {a.example: *d}\n",
		"spool: {max_body: 64MiB, max_bytes: 1GiB, high_water: 0.9, low_water: 0.1}\n",
		"auth: {users: [{username: a, password: b}]}\nmitm: {ca_cert: c, ca_key: k}\n",
		"hosts:\n  A.Example.: {}\n  a.example: {}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("f.yaml", data)
		if err != nil {
			for _, e := range unjoin(err) {
				var fe *FieldError
				if !errors.As(e, &fe) || fe.File != "f.yaml" {
					t.Fatalf("error %q is not a FieldError naming the file", e)
				}
			}
			return
		}
		if _, err := egress.New(egress.Options{Allow: c.Egress.Allow, Deny: c.Egress.Deny}); err != nil {
			t.Fatalf("config accepted egress rules that the guard refuses: %v", err)
		}
		if s := c.Spool; !(s.LowWater < s.HighWater) || s.MaxBody > s.MaxBytes {
			t.Fatalf("accepted spool settings out of order: %+v", s)
		}
		checkHost := func(name string, h HostConfig) {
			if r := h.Rate.PerSecond(); r < pacer.RateMin || r > pacer.RateMax || h.Burst < 1 || h.Burst > pacer.BurstMax {
				t.Fatalf("%s: rate %v, burst %d accepted outside the bounds", name, h.Rate, h.Burst)
			}
		}
		checkHost("defaults", c.Defaults)
		for key, h := range c.Hosts {
			checkHost(key, h)
			if k, err := normalizeHostKey(key); err != nil || k != key {
				t.Fatalf("host key %q is not normalized: %q, %v", key, k, err)
			}
			if key[0] != '*' {
				if got, _ := c.Lookup(key); got != key {
					t.Fatalf("Lookup(%q) = %q", key, got)
				}
			}
		}
	})
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// FuzzHostKey: a hosts key that config accepts selects its own settings
// for the requests it names: "host[:port]" for itself, "*.suffix[:port]"
// for a name under the suffix. Keys that differ only in case or a trailing
// dot are one key.
func FuzzHostKey(f *testing.F) {
	for _, s := range []string{"api.partner.example", "Partner.Example.:8443", "*.slack.example", "*.b.example:8443",
		"10.0.0.5:80", "[2001:db8::1]:8443", "2001:db8::1", "foo-.example", "*.123", "a.example:0", "\u212Aexample.com"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		key, err := normalizeHostKey(raw)
		if err != nil {
			return
		}
		c := Default()
		c.Hosts = map[string]HostConfig{key: c.Defaults}
		c.hosts = newHostIndex(c.Hosts)
		req := key
		if rest, ok := strings.CutPrefix(key, "*."); ok {
			req = "a." + rest
		}
		if got, _ := c.Lookup(req); got != key {
			t.Fatalf("key %q (from %q): Lookup(%q) = %q", key, raw, req, got)
		}
		if again, err := normalizeHostKey(strings.ToUpper(raw)); err != nil || again != key {
			t.Fatalf("%q upper-cased: %q, %v; want %q", raw, again, err, key)
		}
	})
}

package egress

import (
	"context"
	"net/netip"
	"strings"
	"testing"
)

// FuzzRule: any string is parsed without a panic, CheckRule (what config
// checks entries with) and New agree on it in allow and in deny, and an
// accepted rule does what it says: a CIDR or IP denies its first address
// and allows it; a host name (or a name under a "*." wildcard) denies that
// name at a public address and allows it at a private one. The committed
// corpus is in testdata/fuzz/FuzzRule.
func FuzzRule(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", "::ffff:10.0.0.0/104", "169.254.169.254", "fe80::1%eth0", "10.0.0.0/33",
		"*.corp.example", "Partner.Example.", "foo-.example", "*.123", "1.2.3", "*", "a.*.example", " x.example ", "::1"} {
		f.Add(s)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, s string) {
		err := CheckRule(s)
		_, aerr := New(Options{Allow: []string{s}})
		_, derr := New(Options{Deny: []string{s}})
		if (err == nil) != (aerr == nil) || (err == nil) != (derr == nil) {
			t.Fatalf("%q: CheckRule %v, New allow %v, New deny %v", s, err, aerr, derr)
		}
		if err != nil {
			return
		}
		target, addr := "", netip.Addr{}
		if p, perr := netip.ParsePrefix(strings.TrimSpace(s)); perr == nil {
			target, addr = p.Masked().Addr().Unmap().String(), p.Masked().Addr().Unmap()
		} else if a, perr := netip.ParseAddr(strings.TrimSpace(s)); perr == nil {
			target, addr = a.Unmap().String(), a.Unmap()
		} else {
			name := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ".")
			if rest, wild := strings.CutPrefix(name, "*."); wild {
				name = "a." + rest
			}
			target = name
		}
		public, private := []string{"93.184.216.34"}, []string{"10.1.2.3"}
		if addr.IsValid() {
			public, private = nil, nil
		}
		deny := mustNew(t, Options{Deny: []string{s}, Resolver: static(map[string][]string{target: public})})
		if _, err := deny.Check(ctx, target); !IsDenied(err) {
			t.Fatalf("deny %q: %s passed (%v)", s, target, err)
		}
		allow := mustNew(t, Options{Allow: []string{s}, Resolver: static(map[string][]string{target: private})})
		if _, err := allow.Check(ctx, target); err != nil {
			t.Fatalf("allow %q: %s refused: %v", s, target, err)
		}
	})
}

package hostname_test

import (
	"net/netip"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/admin"
	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/egress"
	"github.com/hookpace/hookpace/hostname"
	"github.com/hookpace/hookpace/mitm"
	"github.com/hookpace/hookpace/proxy"
)

// samples is the shared table: every host that some part of hookpace
// meets (a hosts key, an egress entry, a CONNECT target, a webhook's URL),
// and whether it is accepted. Each sample goes through every path below.
var samples = []struct {
	host string
	ok   bool
}{
	{"partner.example", true},
	{"API.Partner.Example", true},
	{"partner.example.", true}, // fully qualified: the same host
	{"_dmarc.partner.example", true},
	{"a-b.x_y.example", true},
	{"localhost", true},
	{"hooks1.example2", true},
	{"xn--bcher-kva.example", true},
	{strings.Repeat("a", 63) + ".example", true},
	{strings.Repeat("a.", 123) + "example", true}, // 253 characters
	{"10.0.0.1", true},
	{"::1", true},
	{"2001:db8::1", true},

	{"foo-.example", false},
	{"-foo.example", false},
	{"foo.-bar.example", false},
	{"123", false},
	{"1.2.3", false},
	{"10.0.0.256", false},
	{"partner.123", false},
	{"fe80::1%eth0", false},
	{"a..example", false},
	{".example", false},
	{"", false},
	{"exa mple.example", false},
	{"ex!ample.example", false},
	{"bücher.example", false},
	{"\u212Aexample.com", false}, // Kelvin sign, which strings.ToLower turns into 'k'
	{"API.\u212A.example", false},
	{"*", false},
	{"a.*.example", false},
	{strings.Repeat("a", 64) + ".example", false},
	{strings.Repeat("a.", 124) + "example", false}, // 255 characters
}

// TestSamplesAgree feeds every sample through config (a hosts key and an
// egress entry, as check-config and run load them), egress.New (as run
// builds its guard), the MITM CA and the proxy's target check: all accept
// it or all refuse it. A host name's wildcard form "*.name" is a hosts key
// and an egress entry too, and agrees between those.
func TestSamplesAgree(t *testing.T) {
	ca := newCA(t)
	for _, s := range samples {
		isIP := false
		if a, err := netip.ParseAddr(s.host); err == nil && a.Zone() == "" {
			isIP = true
		}
		paths := map[string]error{
			"config hosts key":       parseConfig("hosts:\n  " + strconv.Quote(s.host) + ": {}\n"),
			"config egress.allow":    parseConfig("egress:\n  allow: [" + strconv.Quote(s.host) + "]\n"),
			"config egress.deny":     parseConfig("egress:\n  deny: [" + strconv.Quote(s.host) + "]\n"),
			"egress.CheckRule":       egress.CheckRule(s.host),
			"egress.New allow":       newGuard(egress.Options{Allow: []string{s.host}}),
			"egress.New deny":        newGuard(egress.Options{Deny: []string{s.host}}),
			"mitm certificate":       certFor(ca, s.host),
			"proxy target http":      target("http", s.host, ""),
			"proxy target https 443": target("https", s.host, "443"),
			"hostname.Parse":         parseErr(s.host),
			"admin pause host":       adminHost(s.host),
		}
		if !isIP {
			wild := "*." + s.host
			paths["config hosts key *."] = parseConfig("hosts:\n  " + strconv.Quote(wild) + ": {}\n")
			paths["config egress.allow *."] = parseConfig("egress:\n  allow: [" + strconv.Quote(wild) + "]\n")
			paths["egress.New allow *."] = newGuard(egress.Options{Allow: []string{wild}})
		}
		for path, err := range paths {
			if (err == nil) != s.ok {
				t.Errorf("%q via %s: err = %v, want accepted = %v", s.host, path, err, s.ok)
			}
		}
	}
}

func adminHost(h string) error {
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	_, err := admin.HostKey(h)
	return err
}

func parseConfig(yaml string) error {
	_, err := config.Parse("sample.yaml", []byte(yaml))
	return err
}

func newGuard(o egress.Options) error {
	_, err := egress.New(o)
	return err
}

func parseErr(h string) error {
	_, _, err := hostname.Parse(h)
	return err
}

func target(scheme, host, port string) error {
	h := host
	if strings.Contains(h, ":") {
		h = "[" + strings.ReplaceAll(h, "%", "%25") + "]"
	}
	if port != "" {
		h += ":" + port
	}
	u, err := url.Parse(scheme + "://" + h + "/hook")
	if err != nil {
		return err // the client could not send it either
	}
	return proxy.CheckTarget(u)
}

func newCA(t testing.TB) *mitm.CA {
	t.Helper()
	cert, key, err := mitm.InitCA(filepath.Join(t.TempDir(), "ca"))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := mitm.LoadCA(cert, key, 10)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func certFor(ca *mitm.CA, host string) error {
	_, err := ca.Certificate(host)
	return err
}

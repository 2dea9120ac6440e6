package hostname_test

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/hookpace/hookpace/egress"
	"github.com/hookpace/hookpace/hostname"
	"github.com/hookpace/hookpace/proxy"
)

// FuzzHostsAgree feeds any string through every path that reads a host
// and holds them to one verdict, the one hostname.Parse gives: a hosts key
// and an egress entry in a config file (as check-config and run read it),
// egress.CheckRule and egress.New (as run builds its guard), the MITM CA
// and the proxy's target check. A "*." wildcard is held to the verdict on
// its name by the paths that take wildcards. Egress entries are trimmed of
// white space; the others are not. The committed corpus is in
// testdata/fuzz/FuzzHostsAgree; go test runs it, and -fuzz extends it.
func FuzzHostsAgree(f *testing.F) {
	for _, s := range samples {
		f.Add(s.host)
		f.Add("*." + s.host)
	}
	f.Add(" partner.example ")
	f.Add("\u212Aexample.com") // Kelvin sign: strings.ToLower makes it 'k'
	ca := newCA(f)
	f.Fuzz(func(t *testing.T, s string) {
		_, _, perr := hostname.Parse(s)
		valid := perr == nil
		rest, wild := strings.CutPrefix(s, "*.")
		if wild {
			_, ip, err := hostname.Parse(rest)
			valid = err == nil && !ip.IsValid()
		}
		trimmed := strings.TrimSpace(s)
		if strings.Contains(s, "/") || strings.Contains(rest, ":") && !isIP(rest) {
			// A CIDR, or a host:port: not a bare host, and each path has its
			// own rule for those; only no crash is asked here.
			_ = egress.CheckRule(s)
			_ = parseConfig(yamlDoc("hosts", map[string]any{s: map[string]any{}}))
			return
		}
		check := func(path string, err error, want bool) {
			if (err == nil) != want {
				t.Errorf("%q via %s: err = %v, want accepted = %v (hostname.Parse: %v)", s, path, err, want, perr)
			}
		}
		egressWant := valid
		if trimmed != s {
			_, _, terr := hostname.Parse(strings.TrimPrefix(trimmed, "*."))
			egressWant = terr == nil && !strings.Contains(trimmed, " ")
			if strings.HasPrefix(trimmed, "*.") {
				_, ip, _ := hostname.Parse(strings.TrimPrefix(trimmed, "*."))
				egressWant = egressWant && !ip.IsValid()
			}
		}
		check("egress.CheckRule", egress.CheckRule(s), egressWant)
		check("egress.New deny", newGuard(egress.Options{Deny: []string{s}}), egressWant)
		if doc, ok := yamlRoundTrip("egress", map[string]any{"allow": []string{s}}, s); ok {
			check("config egress.allow", parseConfig(doc), egressWant)
		}
		if doc, ok := yamlRoundTrip("hosts", map[string]any{s: map[string]any{}}, s); ok && s != "" {
			check("config hosts key", parseConfig(doc), valid)
		}
		if wild {
			return
		}
		check("mitm certificate", certFor(ca, s), valid)
		h := s
		if strings.Contains(h, ":") {
			h = "[" + h + "]"
		}
		check("proxy target", proxy.CheckTarget(&url.URL{Scheme: "https", Host: h, Path: "/hook"}), valid)
	})
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

func yamlDoc(key string, v any) string {
	b, _ := yaml.Marshal(map[string]any{key: v})
	return string(b)
}

// yamlRoundTrip encodes {key: v} as a config file would hold it, and
// reports whether decoding gives back s where it was put (YAML can't hold
// every byte string).
func yamlRoundTrip(key string, v any, s string) (string, bool) {
	doc := yamlDoc(key, v)
	if strings.Contains(doc, "!!binary") {
		return "", false // not UTF-8: a config file can't hold it as a string
	}
	var back map[string]map[string]any
	if err := yaml.Unmarshal([]byte(doc), &back); err != nil {
		return "", false
	}
	switch key {
	case "egress":
		l, _ := back["egress"]["allow"].([]any)
		return doc, len(l) == 1 && l[0] == s
	default:
		_, ok := back["hosts"][s]
		return doc, ok && len(back["hosts"]) == 1
	}
}

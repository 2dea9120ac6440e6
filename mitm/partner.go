package mitm

import (
	"strings"

	"golang.org/x/net/publicsuffix"
)

// PartnerName reports whether name (normalized, no port) can only be a
// name on the public internet, so that a CA that vouches for names it was
// never told of may vouch for it. It cannot when it is localhost or below
// it (RFC 6761), a single label (a search-domain name: "kubernetes",
// "redis"), or two labels whose last is not a public suffix: Kubernetes'
// short forms ("kubernetes.default", "redis.ns") resolve through the
// pod's search path, and whether a namespace of that name exists is
// unknowable here. Longer names below the cluster's own suffixes are the
// CA's exclusions' business (DefaultExclude).
func PartnerName(name string) bool {
	name = strings.TrimSuffix(name, ".")
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return false
	}
	labels := strings.Count(name, ".") + 1
	if labels < 2 {
		return false
	}
	if labels > 2 {
		return true
	}
	// PublicSuffix says icann only for a rule of the ICANN section; a
	// label no rule lists falls to the implicit "*" rule, icann false.
	_, icann := publicsuffix.PublicSuffix(name[strings.LastIndexByte(name, '.')+1:])
	return icann
}

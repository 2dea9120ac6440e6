package rewrite

import (
	"fmt"
	"net/http"
	"strings"
)

// Headers is a host's header rules, applied to each attempt's request
// headers: Remove first, then Set. Names are canonical.
type Headers struct {
	Set    []Header
	Remove []string
}

// Header is one header set to a fixed value.
type Header struct {
	Name, Value string
}

// AppliedHeader carries, in a stored webhook's headers, the JSON rules
// that ingest applied to its body: the journal keeps it with the other
// request headers. It is hookpace's own and never leaves (Apply removes
// it, rules or none).
const AppliedHeader = "Hookpace-Rewrite"

// Apply rewrites h in place. A nil *Headers still removes AppliedHeader.
func (r *Headers) Apply(h http.Header) {
	delete(h, AppliedHeader)
	if r == nil {
		return
	}
	for _, name := range r.Remove {
		delete(h, name)
	}
	for _, s := range r.Set {
		h[s.Name] = []string{s.Value}
	}
}

// Strip removes the Remove headers from h in place: what ingest does
// before a webhook is stored, so that a removed value is never written
// to the spool, the journal or the dead letters. A nil *Headers removes
// nothing.
func (r *Headers) Strip(h http.Header) {
	if r == nil {
		return
	}
	for _, name := range r.Remove {
		delete(h, name)
	}
}

// CheckName says why name may not be set or removed by a rule: it is a
// connection's (hop-by-hop) or hookpace's own.
// signed are the headers the host's signing writes, which are its too.
func CheckName(name string, signed []string) error {
	c := http.CanonicalHeaderKey(name)
	switch c {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
		"Host", "Content-Length", "Expect":
		return fmt.Errorf("%s is a connection's header (hop-by-hop or framing): hookpace sets it", c)
	}
	for _, s := range signed {
		if http.CanonicalHeaderKey(s) == c {
			return fmt.Errorf("%s is written by the host's signing (sign)", c)
		}
	}
	switch {
	case strings.HasPrefix(c, "Proxy-"):
		return fmt.Errorf("%s is a proxy's header: never sent to a partner", c)
	case strings.HasPrefix(c, "X-Hookpace-"), strings.HasPrefix(c, "Hookpace-"):
		return fmt.Errorf("%s is hookpace's own header", c)
	}
	return nil
}

package config

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/hookpace/hookpace/rewrite"
	"github.com/hookpace/hookpace/sign"
	"gopkg.in/yaml.v3"
)

// Rewrite is a host's `rewrite` block: what leaves for the partner.
//
//	rewrite:
//	  headers:
//	    set: {X-Tenant: acme}       # at each attempt, before signing
//	    remove: [X-Internal-Trace]
//	  json:
//	    drop: ["$.customer.email"]  # once at ingest, before the webhook is stored
//	    mask: ["$.card.number"]
//
// Each of headers and json replaces defaults' as a whole when the host
// sets it; one the host leaves out is inherited; `headers: {}` or
// `json: {}` turns defaults' off for the host.
type Rewrite struct {
	Headers *rewrite.Headers // nil: none
	JSON    *rewrite.JSON    // nil: none
	// HeadersLine is the line of the headers block that set Headers, for
	// a problem found with them later (signing a host inherits them).
	HeadersLine int
}

type rawRewrite struct {
	Headers yaml.Node `yaml:"headers"`
	JSON    yaml.Node `yaml:"json"`
}

type rawRewriteHeaders struct {
	Set    yaml.Node          `yaml:"set"`
	Remove opt[[]opt[string]] `yaml:"remove"`
}

type rawRewriteJSON struct {
	Drop opt[[]opt[string]] `yaml:"drop"`
	Mask opt[[]opt[string]] `yaml:"mask"`
}

var (
	rewriteFields        = map[string]bool{"headers": true, "json": true}
	rewriteHeadersFields = map[string]bool{"set": true, "remove": true}
	rewriteJSONFields    = map[string]bool{"drop": true, "mask": true}
)

// resolveRewrite resolves the rewrite block at n (path is e.g.
// "defaults.rewrite") over base; the headers the host's signing sc
// writes are hookpace's.
func resolveRewrite(p *problems, path string, n *yaml.Node, base Rewrite, sc *Signing) Rewrite {
	var r rawRewrite
	if n = deref(n); !decodeBlock(p, path, n, rewriteFields, "headers, json", &r) {
		return base
	}
	out := base
	if h := deref(&r.Headers); h.Kind != 0 {
		out.Headers, out.HeadersLine = resolveRewriteHeaders(p, path+".headers", h, sc.Headers()), h.Line
	}
	if j := deref(&r.JSON); j.Kind != 0 {
		out.JSON = resolveRewriteJSON(p, path+".json", j)
	}
	return out
}

func resolveRewriteHeaders(p *problems, path string, n *yaml.Node, signed []string) *rewrite.Headers {
	var r rawRewriteHeaders
	if !decodeBlock(p, path, n, rewriteHeadersFields, "set, remove", &r) {
		return nil
	}
	h := &rewrite.Headers{}
	seen := map[string]string{}
	name := func(fieldPath string, line int, s string) (string, bool) {
		if err := checkHeaderName(s); err != nil || s == "" {
			if err == nil {
				p.add(line, fieldPath, "empty header name")
			} else {
				p.add(line, fieldPath, "%v", err)
			}
			return "", false
		}
		if err := rewrite.CheckName(s, signed); err != nil {
			p.add(line, fieldPath, "%v: not for rewrite", err)
			return "", false
		}
		c := http.CanonicalHeaderKey(s)
		if prev, dup := seen[c]; dup {
			p.add(line, fieldPath, "%s is also in %s", c, prev)
			return "", false
		}
		seen[c] = fieldPath
		return c, true
	}
	if s := deref(&r.Set); s.Kind != 0 {
		if s.Kind != yaml.MappingNode {
			p.add(s.Line, path+".set", "want a mapping of header names to values, got %s", quoteNode(s))
		} else {
			for i := 0; i+1 < len(s.Content); i += 2 {
				k, v := s.Content[i], deref(s.Content[i+1])
				fp := path + ".set." + k.Value
				c, ok := name(fp, k.Line, k.Value)
				if !ok {
					continue
				}
				if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
					p.add(v.Line, fp, "want a value (text), got %s", quoteNode(v))
					continue
				}
				val := strings.TrimSpace(v.Value)
				if !validHeaderValue(val) {
					p.add(v.Line, fp, "%q is not a valid header value (control characters)", v.Value)
					continue
				}
				h.Set = append(h.Set, rewrite.Header{Name: c, Value: val})
			}
		}
	}
	var remove []string
	list(p, path+".remove", r.Remove, &remove, nil, false)
	for i, s := range remove {
		line := r.Remove.Line
		if i < len(r.Remove.V) {
			line = r.Remove.V[i].Line
		}
		if c, ok := name(path+".remove["+strconv.Itoa(i)+"]", line, s); ok {
			h.Remove = append(h.Remove, c)
		}
	}
	slices.SortFunc(h.Set, func(a, b rewrite.Header) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(h.Remove)
	if len(h.Set)+len(h.Remove) == 0 {
		return nil
	}
	return h
}

func resolveRewriteJSON(p *problems, path string, n *yaml.Node) *rewrite.JSON {
	var r rawRewriteJSON
	if !decodeBlock(p, path, n, rewriteJSONFields, "drop, mask", &r) {
		return nil
	}
	j := &rewrite.JSON{}
	seen := map[string]string{}
	for _, l := range []struct {
		name string
		o    opt[[]opt[string]]
		dst  *[]rewrite.Path
	}{{"drop", r.Drop, &j.Drop}, {"mask", r.Mask, &j.Mask}} {
		var ss []string
		list(p, path+"."+l.name, l.o, &ss, nil, false)
		for i, s := range ss {
			fp := path + "." + l.name + "[" + strconv.Itoa(i) + "]"
			line := l.o.V[i].Line
			pp, err := rewrite.ParsePath(strings.TrimSpace(s))
			if err != nil {
				p.add(line, fp, "%v", err)
				continue
			}
			if prev, dup := seen[pp.String()]; dup {
				p.add(line, fp, "%s is also in %s", pp, prev)
				continue
			}
			seen[pp.String()] = fp
			*l.dst = append(*l.dst, pp)
		}
	}
	if len(j.Drop)+len(j.Mask) == 0 {
		return nil
	}
	return j
}

// checkRewriteSigning reports header rules a host inherits that name a
// header its own signing writes (path is the host's, line its sign
// block's).
func checkRewriteSigning(p *problems, path string, line int, rw Rewrite, sc *Signing) {
	if rw.Headers == nil {
		return
	}
	names := slices.Clone(rw.Headers.Remove)
	for _, s := range rw.Headers.Set {
		names = append(names, s.Name)
	}
	for _, n := range names {
		if err := rewrite.CheckName(n, sc.Headers()); err != nil {
			p.add(line, path+".sign", "the rewrite.headers this host inherits (line %d) name %s, which signing writes", rw.HeadersLine, n)
		}
	}
}

// Headers are the request headers signing by s writes (none for nil).
func (s *Signing) Headers() []string {
	switch {
	case s == nil:
		return nil
	case s.Scheme == sign.HMACSHA256:
		return []string{s.Header}
	}
	return []string{sign.HeaderID, sign.HeaderTimestamp, sign.HeaderSignature}
}

// validHeaderValue reports whether v may be sent as a header's value:
// no control characters but tab.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// String describes the rules ("" for none): "headers set X-Tenant: acme;
// headers remove X-Internal-Trace; json drop $.customer.email; json mask
// $.card.number". Header values here are not secret (auth.headers are).
func (r Rewrite) String() string {
	var parts []string
	if h := r.Headers; h != nil {
		var set []string
		for _, s := range h.Set {
			set = append(set, s.Name+": "+s.Value)
		}
		if len(set) > 0 {
			parts = append(parts, "headers set "+strings.Join(set, ", "))
		}
		if len(h.Remove) > 0 {
			parts = append(parts, "headers remove "+strings.Join(h.Remove, ", "))
		}
	}
	if j := r.JSON; j != nil {
		for _, l := range []struct {
			what  string
			paths []rewrite.Path
		}{{"json drop ", j.Drop}, {"json mask ", j.Mask}} {
			if len(l.paths) == 0 {
				continue
			}
			ps := make([]string, len(l.paths))
			for i, p := range l.paths {
				ps[i] = p.String()
			}
			parts = append(parts, l.what+strings.Join(ps, ", "))
		}
	}
	return strings.Join(parts, "; ")
}

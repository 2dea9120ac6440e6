package config

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/hookpace/hookpace/hostname"
	"gopkg.in/yaml.v3"
)

// InboundTarget is one destination of a route's webhooks: `to` as a
// URL, or each entry of `to` as a list. Each target's copy of a webhook
// is its own delivery, paced by its host's entry (Host), with its own
// dead letter and replay.
//
//	to:
//	  - http://127.0.0.1:3000
//	  - url: http://billing:8080
//	    name: billing
//	    filter: {json: type, matches: "^invoice\\."}
//	    rewrite: {json: {drop: ["$.data.object.customer_email"]}}
type InboundTarget struct {
	Name    string // `name`, else "to[i]"; "" for a route with one `to`
	URL     string // the base URL, without a trailing slash
	Host    string // URL's queue key
	Filter  *InboundFilter
	Rewrite Rewrite // applied at the door to this target's copy
	Line    int
}

// InboundFilter picks the webhooks a target takes: every condition set
// must hold. JSON names a top-level field of the body and Header a
// request header; Equals or Matches tests that value; Path is a glob of
// the path as the app routes it.
type InboundFilter struct {
	JSON    string
	Header  string
	Equals  *string
	Matches *regexp.Regexp
	Path    string
}

// String is the filter as check-config prints it.
func (f *InboundFilter) String() string {
	if f == nil {
		return "every webhook"
	}
	var parts []string
	what := ""
	switch {
	case f.JSON != "":
		what = "json " + f.JSON
	case f.Header != "":
		what = "header " + f.Header
	}
	switch {
	case f.Equals != nil:
		parts = append(parts, fmt.Sprintf("%s = %q", what, *f.Equals))
	case f.Matches != nil:
		parts = append(parts, fmt.Sprintf("%s ~ /%s/", what, f.Matches))
	}
	if f.Path != "" {
		parts = append(parts, "path "+f.Path)
	}
	return strings.Join(parts, " and ")
}

type rawTarget struct {
	URL     opt[string] `yaml:"url"`
	Name    opt[string] `yaml:"name"`
	Filter  yaml.Node   `yaml:"filter"`
	Rewrite yaml.Node   `yaml:"rewrite"`
}

type rawFilter struct {
	JSON    opt[string] `yaml:"json"`
	Header  opt[string] `yaml:"header"`
	Equals  opt[string] `yaml:"equals"`
	Matches opt[string] `yaml:"matches"`
	Path    opt[string] `yaml:"path"`
}

var (
	targetFields = map[string]bool{"url": true, "name": true, "filter": true, "rewrite": true}
	filterFields = map[string]bool{"json": true, "header": true, "equals": true, "matches": true, "path": true}
)

// resolveTargets resolves a route's `to`: a URL (one target, unnamed),
// or a list of URLs and {url, name, filter, rewrite} mappings. Nil when
// `to` is missing or wrong (a problem is added for what is wrong).
func resolveTargets(p *problems, path string, n *yaml.Node, line int) []InboundTarget {
	switch {
	case n.Kind == 0 || n.ShortTag() == "!!null":
		p.add(line, path, "required: the app's base URL, e.g. http://127.0.0.1:3000, or a list of targets")
		return nil
	case n.Kind == yaml.ScalarNode:
		t, ok := resolveTargetURL(p, path, n)
		if !ok {
			return nil
		}
		return []InboundTarget{t}
	case n.Kind != yaml.SequenceNode:
		p.add(n.Line, path, "want a URL or a list of targets, got %s", quoteNode(n))
		return nil
	case len(n.Content) == 0:
		p.add(n.Line, path, "must not be empty")
		return nil
	}
	var out []InboundTarget
	names := map[string]bool{}
	ok := true
	for i, e := range n.Content {
		tpath := fmt.Sprintf("%s[%d]", path, i)
		t, good := resolveTarget(p, tpath, deref(e))
		if !good {
			ok = false
			continue
		}
		if t.Name == "" {
			t.Name = fmt.Sprintf("to[%d]", i)
		}
		if names[t.Name] {
			p.add(e.Line, tpath+".name", "target name %q is used twice in this route", t.Name)
			ok = false
		}
		names[t.Name] = true
		out = append(out, t)
	}
	if !ok {
		return nil
	}
	return out
}

func resolveTargetURL(p *problems, path string, n *yaml.Node) (InboundTarget, bool) {
	var s string
	if n.Kind != yaml.ScalarNode || n.Decode(&s) != nil {
		p.add(n.Line, path, "want a URL, got %s", quoteNode(n))
		return InboundTarget{}, false
	}
	if err := checkAppURL(s); err != nil {
		p.add(n.Line, path, "%v", err)
		return InboundTarget{}, false
	}
	s = strings.TrimSuffix(s, "/")
	u, _ := url.Parse(s)
	return InboundTarget{URL: s, Host: hostname.Key(u), Line: n.Line}, true
}

func resolveTarget(p *problems, path string, n *yaml.Node) (InboundTarget, bool) {
	if n.Kind == yaml.ScalarNode {
		return resolveTargetURL(p, path, n)
	}
	var r rawTarget
	if !decodeBlock(p, path, n, targetFields, "url, name, filter, rewrite", &r) {
		return InboundTarget{}, false
	}
	if r.URL.Err != nil || !r.URL.Set {
		if r.URL.Err == nil {
			p.add(n.Line, path+".url", "required: the target's base URL")
		} else {
			p.add(r.URL.Line, path+".url", "%v", r.URL.Err)
		}
		return InboundTarget{}, false
	}
	var urlNode yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "url" {
			urlNode = *deref(n.Content[i+1])
		}
	}
	t, ok := resolveTargetURL(p, path+".url", &urlNode)
	if !ok {
		return t, false
	}
	t.Line = n.Line
	field(p, path+".name", r.Name, &t.Name, nonEmpty)
	t.Filter = resolveFilter(p, path+".filter", deref(&r.Filter))
	t.Rewrite = resolveRewrite(p, path+".rewrite", deref(&r.Rewrite), Rewrite{}, nil)
	return t, true
}

func resolveFilter(p *problems, path string, n *yaml.Node) *InboundFilter {
	var r rawFilter
	if !decodeBlock(p, path, n, filterFields, "json or header with equals or matches, path", &r) {
		return nil
	}
	f := &InboundFilter{}
	field(p, path+".json", r.JSON, &f.JSON, nonEmpty)
	field(p, path+".header", r.Header, &f.Header, checkHeaderName)
	field(p, path+".path", r.Path, &f.Path, checkGlob)
	var eq, re string
	if field(p, path+".equals", r.Equals, &eq, nil) {
		f.Equals = &eq
	}
	if field(p, path+".matches", r.Matches, &re, nonEmpty) {
		rx, err := regexp.Compile(re)
		if err != nil {
			p.add(r.Matches.Line, path+".matches", "not a regular expression (RE2): %v", err)
		}
		f.Matches = rx
	}
	switch {
	case r.JSON.Set && r.Header.Set:
		p.add(n.Line, path, "one of json or header, not both")
	case (r.JSON.Set || r.Header.Set) && r.Equals.Set == r.Matches.Set:
		p.add(n.Line, path, "json or header takes one of equals or matches")
	case !r.JSON.Set && !r.Header.Set && (r.Equals.Set || r.Matches.Set):
		p.add(n.Line, path, "equals and matches test a json field or a header: name one")
	case !r.JSON.Set && !r.Header.Set && !r.Path.Set:
		p.add(n.Line, path, "needs a condition: json or header (with equals or matches), or path")
	}
	return f
}

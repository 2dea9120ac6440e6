package config

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

var (
	reSyntax  = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	reLine    = regexp.MustCompile(`^line (\d+): (.*)$`)
	reUnknown = regexp.MustCompile(`^field (.+) not found in type \S+$`)
	reDupKey  = regexp.MustCompile(`^mapping key (".*") already defined at line (\d+)$`)
	reType    = regexp.MustCompile("^cannot unmarshal !!(\\w+) (?:`(.*)` )?into (\\S+)$")
)

// decode parses data into a raw config and an index of positions. It
// returns a nil rawConfig only when the YAML itself is malformed.
func decode(data []byte, p *problems) (*rawConfig, *docIndex) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		if m := reSyntax.FindStringSubmatch(err.Error()); m != nil {
			line, _ := strconv.Atoi(m[1])
			p.add(line, "", "%s", m[2])
		} else {
			p.add(0, "", "%s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		return nil, nil
	}
	doc := indexDoc(&root)

	var raw rawConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(&raw)
	var te *yaml.TypeError
	switch {
	case err == nil, errors.Is(err, io.EOF):
	case errors.As(err, &te):
		for _, s := range te.Errors {
			p.addDecodeError(doc, s)
		}
	default:
		p.add(0, "", "%v", err)
	}
	return &raw, doc
}

// hostEntry is one entry of the hosts mapping, in file order.
type hostEntry struct {
	key  string // as written
	line int
	raw  *rawHost
}

// decodeHosts decodes the hosts mapping entry by entry. yaml.v3's duplicate
// key check is quadratic in the number of keys (seconds for 20,000 hosts),
// so the mapping itself is walked here; unknown fields are checked against
// rawHost's tags because Node.Decode cannot enforce KnownFields.
func decodeHosts(n *yaml.Node, doc *docIndex, p *problems) []hostEntry {
	n = deref(n)
	if n.Kind == 0 || n.ShortTag() == "!!null" {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, "hosts", "want a mapping of host keys to settings, got %s", quoteNode(n))
		return nil
	}
	entries := make([]hostEntry, 0, len(n.Content)/2)
	checked := map[*yaml.Node]bool{} // an anchored mapping is checked once
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], deref(n.Content[i+1])
		path := childPath("hosts", k.Value)
		if k.Kind != yaml.ScalarNode || k.Value == "<<" || k.ShortTag() == "!!binary" {
			p.add(k.Line, "hosts", "want host keys, got %s", quoteNode(k))
			continue
		}
		e := hostEntry{key: k.Value, line: k.Line, raw: &rawHost{}}
		switch {
		case v.ShortTag() == "!!null":
		case v.Kind != yaml.MappingNode:
			p.add(v.Line, path, "want a mapping, got %s", quoteNode(v))
			continue
		default:
			checkKnownFields(v, path, hostFields, checked, p)
			var te *yaml.TypeError
			if err := v.Decode(e.raw); errors.As(err, &te) {
				for _, s := range te.Errors {
					p.addDecodeError(doc, s)
				}
			} else if err != nil {
				p.add(v.Line, path, "%v", err)
			}
		}
		entries = append(entries, e)
	}
	return entries
}

// hostFields is the set of keys allowed in a host entry.
var hostFields = func() map[string]bool {
	m := map[string]bool{}
	t := reflect.TypeFor[rawHost]()
	for i := range t.NumField() {
		m[t.Field(i).Tag.Get("yaml")] = true
	}
	return m
}()

// checkKnownFields reports keys of mapping n that are not in known,
// following merge keys ("<<: *anchor") into the merged mappings.
func checkKnownFields(n *yaml.Node, path string, known map[string]bool, checked map[*yaml.Node]bool, p *problems) {
	if checked[n] {
		return
	}
	checked[n] = true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], deref(n.Content[i+1])
		switch {
		case k.Value == "<<" && v.Kind == yaml.MappingNode:
			checkKnownFields(v, path, known, checked, p)
		case k.Value == "<<" && v.Kind == yaml.SequenceNode:
			for _, m := range v.Content {
				if m = deref(m); m.Kind == yaml.MappingNode {
					checkKnownFields(m, path, known, checked, p)
				}
			}
		case !known[k.Value]:
			p.add(k.Line, "", "unknown field %q in %s", k.Value, path)
		}
	}
}

func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// addDecodeError turns one of yaml.v3's "line N: ..." messages into a
// FieldError naming the field.
func (p *problems) addDecodeError(doc *docIndex, s string) {
	m := reLine.FindStringSubmatch(s)
	if m == nil {
		p.add(0, "", "%s", s)
		return
	}
	line, _ := strconv.Atoi(m[1])
	msg := m[2]
	if u := reUnknown.FindStringSubmatch(msg); u != nil {
		p.add(line, "", "unknown field %q %s", u[1], where(doc.parentOfKey(line, u[1])))
		return
	}
	if d := reDupKey.FindStringSubmatch(msg); d != nil {
		name, _ := strconv.Unquote(d[1])
		p.add(line, "", "duplicate key %q %s (first at line %s)", name, where(doc.parentOfKey(line, name)), d[2])
		return
	}
	if t := reType.FindStringSubmatch(msg); t != nil {
		got := "!!" + t[1]
		if t[2] != "" {
			got = strconv.Quote(t[2])
		}
		p.add(line, doc.pathAt(line, t[1], t[2]), "want %s, got %s", describeGoType(t[3]), got)
		return
	}
	p.add(line, doc.pathAt(line, "", ""), "%s", msg)
}

func where(parent string) string {
	if parent == "" {
		return "at top level"
	}
	return "in " + parent
}

func describeGoType(t string) string {
	switch {
	case strings.HasPrefix(t, "map["), strings.HasPrefix(t, "config.raw"):
		return "a mapping"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	}
	return t
}

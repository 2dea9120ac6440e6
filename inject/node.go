package inject

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"

	"gopkg.in/yaml.v3"
	sigsyaml "sigs.k8s.io/yaml"
)

// The manifest is edited as a yaml.v3 node tree, not through typed
// structs: fields this package does not know (newer API fields, CRD-ish
// extras, comments) and the user's key order survive.

// get returns the value of key in mapping m, or nil.
func get(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// dig follows keys down from m; nil if any is missing.
func dig(m *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		m = get(m, k)
	}
	return m
}

// str returns the string value of key in m ("" if absent or not a scalar).
func str(m *yaml.Node, key string) string {
	if v := get(m, key); v != nil && v.Kind == yaml.ScalarNode {
		return v.Value
	}
	return ""
}

// child returns the value of key in m, adding it with an empty node of
// kind (before the key named before, if m has it; else at the end) when
// it is absent or null.
func child(m *yaml.Node, key string, kind yaml.Kind, before string) *yaml.Node {
	if v := get(m, key); v != nil && !isNull(v) {
		return v
	}
	v := &yaml.Node{Kind: kind}
	switch kind {
	case yaml.MappingNode:
		v.Tag = "!!map"
	case yaml.SequenceNode:
		v.Tag = "!!seq"
	}
	set(m, key, v, before)
	return v
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && (n.Tag == "!!null" || n.Value == "" && n.Tag == "")
}

// set puts key: v in mapping m: in place if m has key, else before the key
// named before (if present), else at the end.
func set(m *yaml.Node, key string, v *yaml.Node, before string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	at := len(m.Content)
	for i := 0; i+1 < len(m.Content); i += 2 {
		if before != "" && m.Content[i].Value == before {
			at = i
			break
		}
	}
	m.Content = slices.Insert(m.Content, at, scalar(key), v)
}

// scalar is a string scalar: the encoder quotes it if it would read back
// as something else ("1", "true").
func scalar(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

func intScalar(n int64) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(n, 10)}
}

// toNode converts a k8s.io/api value into a node through its JSON form
// (the API's own field names and omitempty rules), with the keys in
// order: those named in first, then the others as JSON sorted them; in
// the mappings below it, "name" comes first.
func toNode(v any, first ...string) *yaml.Node {
	b, err := sigsyaml.Marshal(v)
	if err != nil {
		panic("inject: marshal " + err.Error()) // only our own API structs come here
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		panic("inject: " + err.Error())
	}
	n := doc.Content[0]
	nameFirst(n)
	orderKeys(n, first)
	return n
}

func nameFirst(n *yaml.Node) {
	if n.Kind == yaml.MappingNode {
		orderKeys(n, []string{"name"})
	}
	for _, c := range n.Content {
		nameFirst(c)
	}
}

// orderKeys moves the keys named in first to the front of mapping m.
func orderKeys(m *yaml.Node, first []string) {
	var front, rest []*yaml.Node
	for _, k := range first {
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == k {
				front = append(front, m.Content[i], m.Content[i+1])
			}
		}
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if !slices.Contains(first, m.Content[i].Value) {
			rest = append(rest, m.Content[i], m.Content[i+1])
		}
	}
	m.Content = append(front, rest...)
}

// blockStyle clears flow and quoting styles below n, so that a JSON
// document (kubectl get -o json) comes out as ordinary block YAML; the
// encoder still quotes any string that would read back as another type.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// expandAliases replaces each alias below n with a copy of what it names,
// so that an edit of one place (a container's env) does not show up in
// every place that shares the anchor. Anchors stay as they were.
func expandAliases(n *yaml.Node) {
	for i, c := range n.Content {
		if c.Kind == yaml.AliasNode && c.Alias != nil {
			n.Content[i] = deepCopy(c.Alias)
			n.Content[i].Anchor = ""
		}
		expandAliases(n.Content[i])
	}
}

func deepCopy(n *yaml.Node) *yaml.Node {
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, k := range n.Content {
		c.Content[i] = deepCopy(k)
	}
	return &c
}

// hasMerge reports whether mapping m takes keys from elsewhere (<<: *x),
// keys that get and set would not see.
func hasMerge(m *yaml.Node) bool {
	return m != nil && get(m, "<<") != nil
}

// configDoc is the config.yaml of hookpace's ConfigMap, parsed so that
// inject can set what it adds and keep the user's keys, order and
// comments.
type configDoc struct {
	value *yaml.Node // the ConfigMap's data entry, rewritten by write
	doc   yaml.Node  // its document: always a mapping at doc.Content[0]
}

// readConfig parses value, a ConfigMap's config.yaml; an empty document
// (or one that is not a mapping) reads as an empty mapping.
func readConfig(value *yaml.Node, name string) (*configDoc, error) {
	c := &configDoc{value: value}
	if err := yaml.Unmarshal([]byte(value.Value), &c.doc); err != nil {
		return nil, fmt.Errorf("%s: config.yaml: %w", name, err)
	}
	if len(c.doc.Content) == 0 || c.doc.Content[0].Kind != yaml.MappingNode {
		c.doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
	}
	return c, nil
}

// root is the config's top-level mapping.
func (c *configDoc) root() *yaml.Node { return c.doc.Content[0] }

// write puts the config back into the ConfigMap as a literal block.
func (c *configDoc) write(name string) error {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&c.doc); err != nil {
		return fmt.Errorf("%s: config.yaml: %w", name, err)
	}
	enc.Close()
	c.value.Value, c.value.Style = buf.String(), yaml.LiteralStyle
	return nil
}

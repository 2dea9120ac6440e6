package config

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// FieldError is one problem found in a config file. Parse and Load return
// them joined with errors.Join, sorted by line.
type FieldError struct {
	File  string // name given to Parse or Load
	Line  int    // 0 when the problem has no single line
	Field string // e.g. `spool.max_bytes`, `hosts["a.example"].rate`; "" when the message names it
	Msg   string
}

func (e *FieldError) Error() string {
	s := e.File
	if e.Line > 0 {
		s += ":" + strconv.Itoa(e.Line)
	}
	s += ": "
	if e.Field != "" {
		s += e.Field + ": "
	}
	return s + e.Msg
}

// problems collects FieldErrors for one file.
type problems struct {
	file string
	errs []*FieldError
}

func (p *problems) add(line int, field, format string, args ...any) {
	p.errs = append(p.errs, &FieldError{File: p.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// err returns the problems sorted by line and joined, or nil.
func (p *problems) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(p.errs, func(a, b *FieldError) int { return a.Line - b.Line })
	errs := make([]error, len(p.errs))
	for i, e := range p.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// docIndex records where things are in the YAML document, by field path.
type docIndex struct {
	lines map[string]int // path -> line of its key (or list element)
	nodes []nodePos      // every node, in document order
	keys  []keyPos       // every mapping key
}

type nodePos struct {
	line int
	kind yaml.Kind
	tag  string // short tag without "!!", e.g. "int", "seq"
	val  string
	path string
}

type keyPos struct {
	line   int
	name   string
	parent string
}

func indexDoc(root *yaml.Node) *docIndex {
	doc := &docIndex{lines: map[string]int{}}
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		doc.visit(root.Content[0], "", root.Content[0].Line)
	}
	return doc
}

func (doc *docIndex) walk(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			child := childPath(path, k.Value)
			doc.keys = append(doc.keys, keyPos{line: k.Line, name: k.Value, parent: path})
			doc.visit(v, child, k.Line)
		}
	case yaml.SequenceNode:
		for i, v := range n.Content {
			child := path + "[" + strconv.Itoa(i) + "]"
			doc.visit(v, child, v.Line)
		}
	}
}

func (doc *docIndex) visit(n *yaml.Node, path string, line int) {
	if _, seen := doc.lines[path]; !seen {
		doc.lines[path] = line
	}
	tag := n.ShortTag()
	if len(tag) > 2 && tag[:2] == "!!" {
		tag = tag[2:]
	}
	doc.nodes = append(doc.nodes, nodePos{line: n.Line, kind: n.Kind, tag: tag, val: n.Value, path: path})
	if n.Kind != yaml.AliasNode { // an alias's target is indexed where it is defined
		doc.walk(n, path)
	}
}

// childPath names a mapping entry: hosts are indexed by key, everything
// else is a dotted field name.
func childPath(parent, key string) string {
	switch parent {
	case "":
		return key
	case "hosts":
		return "hosts[" + strconv.Quote(key) + "]"
	}
	return parent + "." + key
}

// parentOfKey returns the path of the mapping holding key name at line.
func (doc *docIndex) parentOfKey(line int, name string) string {
	for _, k := range doc.keys {
		if k.line == line && k.name == name {
			return k.parent
		}
	}
	return ""
}

// pathAt guesses which node at line yaml.v3 complained about, preferring
// one with the reported tag and value.
func (doc *docIndex) pathAt(line int, tag, val string) string {
	best, bestScore := "", -1
	for _, n := range doc.nodes {
		if n.line != line {
			continue
		}
		score := 0
		if tag != "" && n.tag == tag {
			score++
			if val != "" && n.val == val {
				score++
			}
		}
		if score > bestScore {
			best, bestScore = n.path, score
		}
	}
	return best
}

// line returns the line of path, or of its nearest ancestor in the file.
func (doc *docIndex) line(path string) int {
	for path != "" {
		if l, ok := doc.lines[path]; ok {
			return l
		}
		path = path[:max(strings.LastIndexAny(path, ".["), 0)]
	}
	return 0
}

// Package rewrite applies a host's rules for what leaves: headers set and
// removed at each delivery attempt, and JSON fields dropped or masked once
// at ingest, before the webhook is stored.
package rewrite

import (
	"fmt"
	"strconv"
	"strings"
)

// Path is a parsed JSON path of the subset hookpace supports:
//
//	$.a.b      a member of a member
//	$.a[*].b   b of every element of the array a
//	$.a[0]     the first element of a
//
// A member name is any run of characters other than '.', '[', ']'; a
// name that holds them is not expressible.
type Path struct {
	src   string
	steps []step
}

type stepKind uint8

const (
	stepKey   stepKind = iota // a member of an object
	stepIndex                 // one element of an array
	stepAll                   // every element of an array
)

type step struct {
	kind  stepKind
	key   string
	index int
}

// MaxPathSteps bounds a path's length: deeper than any webhook a partner
// documents, short enough that a typo cannot cost much.
const MaxPathSteps = 32

// ParsePath parses s, or says what in it is wrong.
func ParsePath(s string) (Path, error) {
	if !strings.HasPrefix(s, "$") {
		return Path{}, fmt.Errorf("path %q must start with $ (like $.customer.email)", s)
	}
	rest := s[1:]
	var steps []step
	for rest != "" {
		switch rest[0] {
		case '.':
			rest = rest[1:]
			n := strings.IndexAny(rest, ".[]")
			if n < 0 {
				n = len(rest)
			}
			if n == 0 {
				return Path{}, fmt.Errorf("path %q: empty member name after '.'", s)
			}
			if rest[:n] == "*" {
				return Path{}, fmt.Errorf("path %q: .* is not supported (only [*] over an array)", s)
			}
			steps = append(steps, step{kind: stepKey, key: rest[:n]})
			rest = rest[n:]
		case '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return Path{}, fmt.Errorf("path %q: '[' without ']'", s)
			}
			in := rest[1:end]
			rest = rest[end+1:]
			if in == "*" {
				steps = append(steps, step{kind: stepAll})
				continue
			}
			i, err := strconv.Atoi(in)
			if err != nil || i < 0 || strings.HasPrefix(in, "+") {
				return Path{}, fmt.Errorf("path %q: [%s] is neither [*] nor an index from 0", s, in)
			}
			steps = append(steps, step{kind: stepIndex, index: i})
		default:
			return Path{}, fmt.Errorf("path %q: unexpected %q (want .name, [N] or [*])", s, rest[0])
		}
	}
	if len(steps) == 0 {
		return Path{}, fmt.Errorf("path %q names the whole body: name a field ($.field)", s)
	}
	if len(steps) > MaxPathSteps {
		return Path{}, fmt.Errorf("path %q has %d steps, more than %d", s, len(steps), MaxPathSteps)
	}
	return Path{src: s, steps: steps}, nil
}

// String returns the path as written.
func (p Path) String() string { return p.src }

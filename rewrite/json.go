package rewrite

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// JSON is a host's JSON field rules: the values at Drop are removed with
// their member (or array element), those at Mask replaced by Marker.
//
// Apply works on the body's bytes (as json.RawMessage would), not on a
// decoded tree: only the objects and arrays on the way to a matched value are
// taken apart and written again; every other value keeps its bytes
// exactly, so key order, number precision, escapes and duplicate keys
// elsewhere are as the app sent them.
type JSON struct {
	Drop []Path
	Mask []Path
}

// Marker is what a masked value becomes: a fixed string, never derived
// from the value, so that nothing of it is left to guess (a hash of a card
// number or an email can be searched for, keyed or not once the key
// leaks) and equal values are not linkable.
const Marker = "[masked]"

var markerJSON = []byte(`"` + Marker + `"`)

// ErrNotJSON is the answer for a body that must be JSON and is not.
var ErrNotJSON = errors.New("body is not JSON")

// Hit is one rule that matched at least one value of a body.
type Hit struct {
	Action string // "drop" or "mask"
	Path   string
	Count  int // values it removed or masked
}

// Applied is what Apply did to one body.
type Applied struct {
	Hits    []Hit
	Dropped int
	Masked  int
}

// Changed reports whether any value was dropped or masked.
func (a Applied) Changed() bool { return a.Dropped+a.Masked > 0 }

// String lists the rules that matched, for the journal: "drop
// $.customer.email (1); mask $.card.number (1)".
func (a Applied) String() string {
	var b strings.Builder
	for i, h := range a.Hits {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s %s (%d)", h.Action, h.Path, h.Count)
	}
	return b.String()
}

// Apply returns body with j's rules applied (body itself when nothing
// matched), or ErrNotJSON. A nil *JSON applies nothing.
func (j *JSON) Apply(body []byte) ([]byte, Applied, error) {
	var a Applied
	if j == nil || len(j.Drop)+len(j.Mask) == 0 {
		return body, a, nil
	}
	if !json.Valid(body) {
		return nil, a, ErrNotJSON
	}
	out := body
	for _, r := range []struct {
		action string
		paths  []Path
		n      *int
	}{{"drop", j.Drop, &a.Dropped}, {"mask", j.Mask, &a.Masked}} {
		for _, p := range r.paths {
			next, n, err := apply(out, p.steps, r.action == "drop")
			if err != nil {
				return nil, Applied{}, fmt.Errorf("%s %s: %w", r.action, p, err)
			}
			if n > 0 {
				out = next
				*r.n += n
				a.Hits = append(a.Hits, Hit{Action: r.action, Path: p.src, Count: n})
			}
		}
	}
	return out, a, nil
}

// apply applies one rule's remaining steps to the JSON value raw,
// returning the new value and how many values it dropped or masked (raw
// itself when none).
func apply(raw []byte, steps []step, drop bool) ([]byte, int, error) {
	s, last := steps[0], len(steps) == 1
	v := bytes.TrimSpace(raw)
	if len(v) == 0 {
		return raw, 0, nil
	}
	switch {
	case s.kind == stepKey && v[0] == '{':
		ms, err := members(v)
		if err != nil {
			return nil, 0, err
		}
		total := 0
		out := ms[:0]
		for _, m := range ms {
			if m.key != s.key {
				out = append(out, m)
				continue
			}
			n, keep, err := visit(&m.val, steps, last, drop)
			if err != nil {
				return nil, 0, err
			}
			total += n
			if keep {
				out = append(out, m)
			}
		}
		if total == 0 {
			return raw, 0, nil
		}
		return encodeObject(out), total, nil
	case s.kind != stepKey && v[0] == '[':
		es, err := elements(v)
		if err != nil {
			return nil, 0, err
		}
		total := 0
		out := es[:0]
		for i, e := range es {
			if s.kind == stepIndex && i != s.index {
				out = append(out, e)
				continue
			}
			n, keep, err := visit(&e, steps, last, drop)
			if err != nil {
				return nil, 0, err
			}
			total += n
			if keep {
				out = append(out, e)
			}
		}
		if total == 0 {
			return raw, 0, nil
		}
		return encodeArray(out), total, nil
	}
	return raw, 0, nil // the body has no such place: nothing to do
}

// visit applies the rule to one matched value: the last step drops or
// masks it, an earlier one goes down into it. keep is false for a value
// to remove.
func visit(val *[]byte, steps []step, last, drop bool) (n int, keep bool, err error) {
	if last {
		if drop {
			return 1, false, nil
		}
		*val = markerJSON
		return 1, true, nil
	}
	next, n, err := apply(*val, steps[1:], drop)
	if err != nil {
		return 0, true, err
	}
	*val = next
	return n, true, nil
}

type member struct {
	key string
	val []byte
}

// errShape is a body that json.Valid accepted and the splitter could not
// follow: a bug, reported rather than a panic.
var errShape = errors.New("unexpected JSON shape")

// members splits the object v (valid JSON) into its members, in order,
// duplicates kept. Values are slices of v.
func members(v []byte) ([]member, error) {
	var out []member
	i := skipSpace(v, 1)
	for i < len(v) && v[i] != '}' {
		if v[i] != '"' {
			return nil, errShape
		}
		kend := skipString(v, i)
		key, err := unquote(v[i:kend])
		if err != nil {
			return nil, err
		}
		i = skipSpace(v, kend)
		if i >= len(v) || v[i] != ':' {
			return nil, errShape
		}
		start := skipSpace(v, i+1)
		end := skipValue(v, start)
		if end <= start {
			return nil, errShape
		}
		out = append(out, member{key: key, val: v[start:end]})
		if i = skipSpace(v, end); i < len(v) && v[i] == ',' {
			i = skipSpace(v, i+1)
		}
	}
	return out, nil
}

// elements splits the array v (valid JSON) into its elements, in order.
func elements(v []byte) ([][]byte, error) {
	var out [][]byte
	i := skipSpace(v, 1)
	for i < len(v) && v[i] != ']' {
		end := skipValue(v, i)
		if end <= i {
			return nil, errShape
		}
		out = append(out, v[i:end])
		if i = skipSpace(v, end); i < len(v) && v[i] == ',' {
			i = skipSpace(v, i+1)
		}
	}
	return out, nil
}

func skipSpace(v []byte, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string that starts at v[i].
func skipString(v []byte, i int) int {
	for i++; i < len(v); i++ {
		switch v[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(v)
}

// skipValue returns the index after the value that starts at v[i] (v is
// valid JSON, so only strings and brackets need following).
func skipValue(v []byte, i int) int {
	if i >= len(v) {
		return i
	}
	switch v[i] {
	case '"':
		return skipString(v, i)
	case '{', '[':
		depth := 0
		for ; i < len(v); i++ {
			switch v[i] {
			case '"':
				i = skipString(v, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(v)
	}
	for ; i < len(v); i++ {
		switch v[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}

// unquote decodes the JSON string q, quotes included.
func unquote(q []byte) (string, error) {
	if bytes.IndexByte(q, '\\') < 0 {
		return string(q[1 : len(q)-1]), nil
	}
	var s string
	err := json.Unmarshal(q, &s)
	return s, err
}

func encodeObject(ms []member) []byte {
	n := 2
	for _, m := range ms {
		n += len(m.key) + len(m.val) + 4
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendKey(b, m.key)
		b = append(b, ':')
		b = append(b, m.val...)
	}
	return append(b, '}')
}

func encodeArray(es [][]byte) []byte {
	n := 2
	for _, e := range es {
		n += len(e) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, e := range es {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	return append(b, ']')
}

// appendKey appends k as a JSON string, without HTML escaping (the app's
// "<" stays "<").
func appendKey(b []byte, k string) []byte {
	plain := true
	for i := 0; i < len(k) && plain; i++ {
		c := k[i]
		plain = c >= 0x20 && c < 0x7f && c != '"' && c != '\\'
	}
	if plain {
		b = append(b, '"')
		b = append(b, k...)
		return append(b, '"')
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(k) // a string always encodes
	return append(b, bytes.TrimRight(buf.Bytes(), "\n")...)
}

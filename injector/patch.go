package injector

import (
	"reflect"
	"slices"
	"strings"
)

// Op is one JSONPatch (RFC 6902) operation.
type Op struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitzero"`
}

// deep are the fields diff compares key by key; every other field that
// differs is replaced whole. inject edits the Pod's metadata (its
// annotations) and spec (containers, volumes, grace period).
var deep = map[string]bool{"/metadata": true, "/spec": true}

// diff is a JSONPatch that turns before into after.
func diff(before, after map[string]any) []Op {
	return diffAt("", before, after)
}

func diffAt(at string, before, after map[string]any) []Op {
	var keys []string
	for k := range before {
		keys = append(keys, k)
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var ops []Op
	for _, k := range keys {
		path := at + "/" + escape(k)
		b, inBefore := before[k]
		a, inAfter := after[k]
		switch {
		case !inAfter:
			ops = append(ops, Op{Op: "remove", Path: path})
		case !inBefore:
			ops = append(ops, Op{Op: "add", Path: path, Value: a})
		case reflect.DeepEqual(a, b):
		default:
			bm, bok := b.(map[string]any)
			am, aok := a.(map[string]any)
			if deep[path] && bok && aok {
				ops = append(ops, diffAt(path, bm, am)...)
				continue
			}
			ops = append(ops, Op{Op: "replace", Path: path, Value: a})
		}
	}
	return ops
}

// escape is a key as a JSON Pointer (RFC 6901) token.
func escape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

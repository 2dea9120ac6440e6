// Package floors holds the module's packages to their floors: a package
// imports from the module only packages on a floor below its own, so
// that the durable queue knows nothing of what reads it, and the window
// on it nothing of how webhooks are sent.
package floors

import (
	"go/build"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/hookpace/hookpace/"

// rules says, per package, which of the module's packages it may import
// (only, when set) and which it must not (never).
var rules = []struct {
	pkg   string
	only  []string
	never []string
}{
	{pkg: "spool", never: []string{"window", "deliver", "config", "proxy", "admin", "server", "cli"}},
	{pkg: "window", only: []string{"spool"}},
	{pkg: "journal", only: []string{"spool", "internal"}},
	{pkg: "deliver", never: []string{"config", "proxy", "admin", "server", "cli", "fleet"}},
}

func root(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// moduleImports are the module's packages that pkg's non-test files
// import.
func moduleImports(t *testing.T, dir string) []string {
	p, err := build.ImportDir(dir, 0)
	if err != nil {
		t.Fatalf("read the imports of %s: %v", dir, err)
	}
	var out []string
	for _, imp := range p.Imports {
		if rest, ok := strings.CutPrefix(imp, module); ok {
			out = append(out, rest)
		}
	}
	return out
}

func TestFloors(t *testing.T) {
	for _, r := range rules {
		for _, imp := range moduleImports(t, filepath.Join(root(t), r.pkg)) {
			top := strings.SplitN(imp, "/", 2)[0]
			if r.only != nil && !slices.Contains(r.only, top) {
				t.Errorf("%s imports %s; it may import only %v from the module", r.pkg, imp, r.only)
			}
			if slices.Contains(r.never, top) {
				t.Errorf("%s imports %s, a floor above it", r.pkg, imp)
			}
		}
	}
}

// TestFloorsCatchAnImport: the rules see an import that breaks them (the
// deliver package imports spool, which window may; window's rule would
// refuse deliver's other imports).
func TestFloorsCatchAnImport(t *testing.T) {
	imps := moduleImports(t, filepath.Join(root(t), "deliver"))
	if !slices.Contains(imps, "spool") || !slices.Contains(imps, "pacer") {
		t.Fatalf("deliver's module imports read as %v, want spool and pacer among them", imps)
	}
}

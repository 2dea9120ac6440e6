package doclinks

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository, two levels up from this package.
const root = "../.."

func markdown(t *testing.T) []string {
	t.Helper()
	files := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestRepoLinksResolve(t *testing.T) {
	problems, err := Check(markdown(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// Every page under docs/ is in mkdocs.yml's nav, so that the site reaches it.
func TestEveryPageInNav(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "mkdocs.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var nav []string // mkdocs.yml without its comment lines
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			nav = append(nav, l)
		}
	}
	for _, f := range markdown(t)[1:] {
		rel, _ := filepath.Rel(filepath.Join(root, "docs"), f)
		if !strings.Contains(strings.Join(nav, "\n")+"\n", " "+filepath.ToSlash(rel)+"\n") {
			t.Errorf("docs/%s is not in mkdocs.yml's nav", rel)
		}
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"The journal: where is my webhook?":                   "the-journal-where-is-my-webhook",
		"Reload, check-config and shutdown":                   "reload-check-config-and-shutdown",
		"Into your own workload: `hookpace inject`":           "into-your-own-workload-hookpace-inject",
		"Durability first: every commit is fsync'd by Badger": "durability-first-every-commit-is-fsyncd-by-badger",
		"Two experiments (2026-11-22, 03:50 UTC)":             "two-experiments-2026-11-22-0350-utc",
		"snake_case and A — B":                                "snake_case-and-a--b",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

// A broken file, a broken anchor and a duplicate heading's suffix are told
// apart from links that resolve.
func TestCheckFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("b.md", "# B\n\n## Part\n\n## Part\n\n<a id=\"x-1\"></a>\n```\n## Not a heading\n```\n")
	a := write("a.md", "[ok](b.md#part) [dup](b.md#part-1) [id](b.md#x-1) [self](#a)\n"+
		"[nofile](c.md) [noanchor](b.md#nope) [fenced](b.md#not-a-heading) `[code](zzz.md)`\n"+
		"[web](https://example.com/x#y)\n# A\n")
	problems, err := Check([]string{a})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p[strings.Index(p, ": ")+2:strings.Index(p, ": ")+2+strings.Index(p[strings.Index(p, ": ")+2:], ":")])
	}
	want := []string{"c.md", "b.md#nope", "b.md#not-a-heading"}
	if !slices.Equal(got, want) {
		t.Errorf("problems %q, want those of %q", problems, want)
	}
}

// sourceNames returns the strings matching re's first group in the
// non-test Go files of dir.
func sourceNames(t *testing.T, dir string, re *regexp.Regexp) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			names = append(names, m[1])
		}
	}
	if len(names) == 0 {
		t.Fatalf("no names in %s/ match %s", dir, re)
	}
	return names
}

// The reference pages name every metric, event and admin route that the
// source declares.
func TestReferenceIsComplete(t *testing.T) {
	for _, c := range []struct {
		page, dir string
		re        *regexp.Regexp
	}{
		{"metrics.md", "telemetry", regexp.MustCompile(`=\s*"((?:hookpace|http_client)_[a-z_]+)"`)},
		{"events.md", "events", regexp.MustCompile(`\w+\s*=\s*"((?:message|breaker|host|spool|handoff)\.[a-z_]+)"`)},
		{"events.md", "deliver", regexp.MustCompile(`Event\w+\s*=\s*"([a-z]+\.[a-z_]+)"`)},
		{"admin-api.md", "admin", regexp.MustCompile(`mux\.Handle(?:Func)?\("((?:GET|POST) /v1/[^"]*|GET /(?:healthz|readyz|metrics))"`)},
	} {
		b, err := os.ReadFile(filepath.Join(root, "docs", c.page))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range sourceNames(t, c.dir, c.re) {
			if !strings.Contains(string(b), "`"+n+"`") {
				t.Errorf("docs/%s does not name `%s` (declared in %s/)", c.page, n, c.dir)
			}
		}
	}
}

// hasGo reports whether dir holds a Go file, at any depth.
func hasGo(dir string) bool {
	found := false
	filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.HasSuffix(p, ".go") {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found
}

// docs/architecture.md names every directory of the module that holds Go
// code, and every package under internal/.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, parent := range []string{"", "internal"} {
		entries, err := os.ReadDir(filepath.Join(root, parent))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && hasGo(filepath.Join(root, parent, e.Name())) {
				dirs = append(dirs, filepath.ToSlash(filepath.Join(parent, e.Name())))
			}
		}
	}
	for _, d := range dirs {
		name := "`" + d + "/`"
		if strings.HasPrefix(d, "internal/") {
			name = "`" + d + "`"
		}
		if !strings.Contains(string(b), name) {
			t.Errorf("docs/architecture.md does not name %s", name)
		}
	}
}

// docs/reload-and-shutdown.md names every setting that config.RestartRequired
// says a reload cannot apply.
func TestRestartOnlyListComplete(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docs", "reload-and-shutdown.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	names := append(sourceNames(t, "config", regexp.MustCompile(`\{"([a-z_.]+)", old\.`)),
		sourceNames(t, "config", regexp.MustCompile(`return \[\]string\{"([a-z_]+)"\}`))...)
	if !strings.Contains(strings.Join(names, " "), "events") {
		t.Fatalf("the restart fields read from config/ are %q: the test no longer reads them", names)
	}
	for _, n := range names {
		if !strings.Contains(page, "`"+n+"`") && !strings.Contains(page, "`"+strings.SplitN(n, ".", 2)[0]+".*`") {
			t.Errorf("docs/reload-and-shutdown.md does not list %s among the settings a restart applies", n)
		}
	}
	if !strings.Contains(page, "`fleet.*`") {
		t.Error("docs/reload-and-shutdown.md does not list fleet.* among the settings a restart applies")
	}
}

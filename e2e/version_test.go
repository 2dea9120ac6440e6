package e2e

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The README's build command stamps the commit even where GOFLAGS has
// -buildvcs=false (as on the machine this was written on), and the
// Dockerfile's -ldflags stamp what its build args say.
func TestBuildStampsVersionAndRevision(t *testing.T) {
	t.Parallel()
	src, head := gitCheckout(t)
	release, err := os.ReadFile(filepath.Join(src, "cli", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	version := "hookpace v" + strings.TrimSpace(string(release)) + "\n"
	bin := filepath.Join(t.TempDir(), "hookpace")
	build := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", append(append([]string{"build"}, args...), "-o", bin, "./cmd/hookpace")...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %v: %v\n%s", args, err, out)
		}
		out, err := exec.Command(bin, "version").CombinedOutput()
		if err != nil {
			t.Fatalf("hookpace version: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := build("-buildvcs=true"); !strings.HasPrefix(out, version+"commit "+head) {
		t.Errorf("go build -buildvcs=true in a checkout at %s printed\n%s\nwant it to start with\n%scommit %s", head, out, version, head)
	}
	const pkg = "github.com/hookpace/hookpace/cli"
	out := build("-ldflags", "-X "+pkg+".Version=v9.8.7 -X "+pkg+".Commit=0123abc")
	if !strings.HasPrefix(out, "hookpace v9.8.7\ncommit 0123abc\n") {
		t.Errorf("with the Dockerfile's -ldflags, version printed\n%s", out)
	}
	if out := build(); !strings.HasPrefix(out, version+"commit unknown (not stamped") {
		t.Errorf("without stamping, version printed\n%s", out)
	}
}

// gitCheckout returns the module's root and its HEAD when the module is a
// git checkout, and otherwise a copy of it committed to a new repository
// (a source archive has no .git).
func gitCheckout(t *testing.T) (dir, head string) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	git := func(dir string, args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	if top, err := git(root, "rev-parse", "--show-toplevel"); err == nil && top == root {
		head, err := git(root, "rev-parse", "HEAD")
		if err != nil {
			t.Fatal(err)
		}
		return root, head
	}
	dir = t.TempDir()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "node_modules" || rel == "data" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"},
		{"-c", "user.name=test", "-c", "user.email=test@example.com", "commit", "-q", "-m", "copy"}} {
		if out, err := git(dir, args...); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	head, err = git(dir, "rev-parse", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	return dir, head
}

package proctest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Built returns the path of name, a program tests run, built from pkg
// (in the module at dir) once per machine into
// $(go env GOCACHE)/../hookpace-KIND/VERSION/NAME, where later runs find
// it. Concurrent callers, in this process or another, wait for one build
// (an flock on the folder's .lock).
func Built(t testing.TB, kind, version, name, dir, pkg string) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOCACHE: %v", err)
	}
	folder := filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), "hookpace-"+kind, version)
	path := filepath.Join(folder, name)
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(folder, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err == nil {
		return path // built while this one waited
	}
	tmp := path + ".tmp"
	start := time.Now()
	b := Command("go", "build", "-trimpath", "-o", tmp, pkg)
	b.Dir = dir
	if out, err := b.CombinedOutput(); err != nil {
		t.Fatalf("building %s %s in %s: %v\n%s", pkg, version, dir, err, out)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s %s in %s", name, version, time.Since(start).Round(time.Second))
	return path
}

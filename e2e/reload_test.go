package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kubeletDir is a config directory as the kubelet keeps a ConfigMap
// volume: each version in a timestamped directory, ..data a symlink to
// the current one, and config.yaml a symlink to ..data/config.yaml.
type kubeletDir struct {
	t   *testing.T
	dir string
	n   int
}

// update writes a new version the way the kubelet's atomic writer does:
// a new timestamped directory, a ..data_tmp symlink to it renamed over
// ..data, then the old directory removed.
func (k *kubeletDir) update(write func(path string)) {
	k.t.Helper()
	k.n++
	ts := fmt.Sprintf("..2026_11_25_10_00_%02d.%09d", k.n, k.n)
	if err := os.Mkdir(filepath.Join(k.dir, ts), 0o755); err != nil {
		k.t.Fatal(err)
	}
	write(filepath.Join(k.dir, ts, "config.yaml"))
	old, _ := os.Readlink(filepath.Join(k.dir, "..data"))
	tmp := filepath.Join(k.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		k.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(k.dir, "..data")); err != nil {
		k.t.Fatal(err)
	}
	if k.n == 1 {
		if err := os.Symlink(filepath.Join("..data", "config.yaml"), filepath.Join(k.dir, "config.yaml")); err != nil {
			k.t.Fatal(err)
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(k.dir, old)); err != nil {
			k.t.Fatal(err)
		}
	}
}

// A ConfigMap update reaches a running hookpace through its file
// watch alone (no signal, no restart): a host paced at 1/m gets 100/s, and
// its queued webhooks go at once.
func TestReloadOnKubeletSymlinkSwap(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	H := rc.Host()
	hp := &Hookpace{t: t, Dir: t.TempDir()}
	cm := &kubeletDir{t: t, dir: filepath.Join(hp.Dir, "config")}
	if err := os.Mkdir(cm.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	hostCfg := func(rate string) string {
		return fmt.Sprintf("egress: {allow: [\"127.0.0.0/8\"]}\nhosts:\n  %q: {rate: %s, burst: 1, concurrency: 1}\n", H, rate)
	}
	write := func(rate string) func(string) {
		return func(path string) {
			writeConfig(t, path, "127.0.0.1:0", "127.0.0.1:0", filepath.Join(hp.Dir, "spool"), hostCfg(rate))
		}
	}
	cm.update(write("1/m"))
	hp.Config = filepath.Join(cm.dir, "config.yaml")
	hp.start()
	t.Cleanup(hp.Kill)
	pid := hp.cmd.Process.Pid

	const n = 5
	PostAll(t, hp, n, 1, func(i int) string { return fmt.Sprintf("%s/hook/%d", rc.URL, i) })
	rc.WaitFor(t, 10*time.Second, "the burst's one webhook", func(as []Arrival) bool { return len(as) >= 1 })
	var st struct {
		ConfiguredRate float64 `json:"configured_rate"`
		Queued         int64
	}
	// The receiver counts the webhook before hookpace has read its answer
	// and deleted it.
	Poll(t, 10*time.Second, fmt.Sprintf("%d queued", n-1), func() bool { hp.AdminJSON("/v1/hosts/"+H, &st); return st.Queued == n-1 })
	if st.ConfiguredRate > 1 {
		t.Fatalf("before the update: %d queued at %v/s, want %d at 1/m", st.Queued, st.ConfiguredRate, n-1)
	}

	cm.update(write("100/s"))
	Poll(t, 10*time.Second, "the reload", func() bool {
		return strings.Contains(hp.Log(), "config reloaded") && strings.Contains(hp.Log(), "file changed")
	})
	rc.WaitFor(t, 10*time.Second, "the queued webhooks at the new rate", func(as []Arrival) bool { return len(as) == n })
	// The last delete follows its 2xx.
	Poll(t, 10*time.Second, "an empty queue", func() bool { hp.AdminJSON("/v1/hosts/"+H, &st); return st.Queued == 0 })
	if st.ConfiguredRate != 100 {
		t.Errorf("after the update: %v/s, want 100/s", st.ConfiguredRate)
	}
	if hp.cmd.Process.Pid != pid || strings.Count(hp.Log(), "hookpace started") != 1 {
		t.Errorf("hookpace restarted:\n%s", hp.Log())
	}
	if strings.Contains(hp.Log(), "restart to apply") {
		t.Errorf("the update asked for a restart:\n%s", hp.Log())
	}
}

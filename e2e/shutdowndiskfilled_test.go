package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestShutdownWhileDiskFilledFromOutside: SIGTERM while another process
// has filled the spool's file system and the deletes of delivered
// webhooks wait for space. The stop is bounded by shutdown.timeout:
// hookpace exits 1 and says that deliveries did not settle, rather than
// wait for space that never comes. Nothing is lost: after the filler is
// removed, a restart on the same spool delivers every webhook (those
// whose deletes were held, again). The test mounts a 32 MiB tmpfs,
// which needs root (as CI has); it fails without.
func TestShutdownWhileDiskFilledFromOutside(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("this test mounts a 32 MiB tmpfs, which needs root: mount -t tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	rc := NewReceiver(t)
	hp := &Hookpace{t: t, Dir: dir}
	hp.Config = filepath.Join(t.TempDir(), "hookpace.yaml")
	writeConfig(t, hp.Config, "127.0.0.1:0", "127.0.0.1:0", filepath.Join(dir, "spool"), fmt.Sprintf(`
spool:
  min_free: 13MiB
shutdown:
  timeout: 3s
egress:
  allow: ["127.0.0.0/8"]
hosts:
  %q: {rate: 1000/s, burst: 100, concurrency: 4}
`, rc.Host()))
	hp.start()
	t.Cleanup(hp.Kill)
	if out, err := hp.CLI("pause", rc.Host()); err != nil {
		t.Fatalf("pause: %v: %s", err, out)
	}
	const n = 200
	PostAll(t, hp, n, 8, func(i int) string { return fmt.Sprintf("%s/hook/%d", rc.URL, i) })

	filler := filepath.Join(dir, "filler")
	if out, err := exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=64k").CombinedOutput(); !strings.Contains(string(out), "No space left") {
		t.Fatalf("dd filling the tmpfs: %v: %s", err, out)
	}
	if out, err := hp.CLI("resume", rc.Host()); err != nil {
		t.Fatalf("resume: %v: %s\nhookpace's log:\n%s", err, out, hp.Log())
	}
	Poll(t, 20*time.Second, "deletes held for space", func() bool {
		return strings.Contains(hp.Log(), "deletes wait for space")
	})

	hp.Signal(syscall.SIGTERM)
	// shutdown.timeout (3s), then the spool's close (at least 5s when it
	// hangs), and room for a loaded machine.
	if code := hp.Wait(20 * time.Second); code != 1 {
		t.Fatalf("exit code %d after SIGTERM with deletes held, want 1:\n%s", code, hp.Log())
	}
	if !strings.Contains(hp.Log(), "deliveries did not settle") {
		t.Errorf("the log does not say deliveries did not settle:\n%s", hp.Log())
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	hp.Restart()
	rc.WaitFor(t, 60*time.Second, "every webhook delivered after the restart", func(as []Arrival) bool {
		seen := map[string]bool{}
		for _, a := range as {
			if a.Status/100 == 2 {
				seen[a.Path] = true
			}
		}
		return len(seen) == n
	})
	var sp struct {
		Messages int `json:"messages"`
	}
	Poll(t, 30*time.Second, "an empty spool", func() bool {
		hp.AdminJSON("/v1/spool", &sp)
		return sp.Messages == 0
	})
}

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDiskFilledFromOutsideDuringDeletes: the SIGBUS of a full disk. On a 32 MiB
// tmpfs, 600 webhooks wait behind a paused host; then another process
// fills the file system to the last byte, and the host is resumed. Each
// delivery's delete would write a tombstone into a page of Badger's
// memory-mapped memtable that the file system can no longer give: a
// SIGBUS that killed hookpace. Now deletes wait for space: hookpace stays
// up, says why, delivers no more than its slots hold, and once the filler
// is removed every webhook is delivered and the spool empties. The test
// mounts the tmpfs, which needs root (as CI has); it fails without.
func TestDiskFilledFromOutsideDuringDeletes(t *testing.T) {
	t.Parallel()
	const n = 600
	hp, rc, filler := filledDuringDeletes(t, "", n)
	died := func() bool {
		select {
		case <-hp.exited:
			return true
		default:
			return false
		}
	}
	Poll(t, 20*time.Second, "deletes held for space, or hookpace dead", func() bool {
		return died() || strings.Contains(hp.Log(), "deletes wait for space")
	})
	if died() {
		t.Fatalf("hookpace died when the disk filled during deletes (%v):\n%s", hp.exitErr, fault(hp.Log()))
	}
	var sp struct {
		Messages int `json:"messages"`
	}
	hp.AdminJSON("/v1/spool", &sp)
	if got := Delivered2xx(rc.Arrivals()); got >= n || sp.Messages == 0 {
		t.Fatalf("%d delivered and %d queued with the disk full: want deliveries paused", got, sp.Messages)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	rc.WaitFor(t, 60*time.Second, "every webhook delivered", func(as []Arrival) bool {
		seen := map[string]bool{}
		for _, a := range as {
			seen[a.Path] = true
		}
		return len(seen) == n
	})
	Poll(t, 30*time.Second, "an empty spool", func() bool {
		hp.AdminJSON("/v1/spool", &sp)
		return sp.Messages == 0
	})
	if died() {
		t.Fatalf("hookpace died:\n%s", hp.Log())
	}
	if !strings.Contains(hp.Log(), "held deletes go ahead") {
		t.Errorf("the log does not say the deletes went ahead:\n%s", hp.Log())
	}
	// The resume made on the full disk is recorded now: a restart keeps
	// the host resumed, and a new webhook is delivered.
	Poll(t, 30*time.Second, "the resume recorded once space returned", func() bool {
		return strings.Contains(hp.Log(), "resume recorded: the spool's disk has room again")
	})
	stopCleanly(t, hp)
	hp.Restart()
	if status, _ := hp.Post(hp.Client(), rc.URL+"/after-restart", WebhookBody(n), nil); status != 202 {
		t.Fatalf("POST after the restart: %d", status)
	}
	rc.WaitFor(t, 30*time.Second, "the webhook posted after the restart (the host not paused again)", func(as []Arrival) bool {
		return slices.ContainsFunc(as, func(a Arrival) bool { return a.Path == "/after-restart" })
	})
}

// filledDuringDeletes mounts a 32 MiB tmpfs (root, as CI has) for the
// spool of a hookpace with extra config, queues n webhooks behind a
// paused host, fills the file system to the last byte from another
// process (dd) and resumes the host: the resume applies unrecorded, and
// the deliveries' deletes wait for space. It returns the filler's path,
// for the test to remove.
func filledDuringDeletes(t *testing.T, extra string, n int) (*Hookpace, *Receiver, string) {
	t.Helper()
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
egress:
  allow: ["127.0.0.0/8"]
hosts:
  %q: {rate: 1000/s, burst: 100, concurrency: 4}
%s`, rc.Host(), extra))
	hp.start()
	t.Cleanup(hp.Kill)
	if out, err := hp.CLI("pause", rc.Host()); err != nil {
		t.Fatalf("pause: %v: %s", err, out)
	}
	PostAll(t, hp, n, 8, func(i int) string { return fmt.Sprintf("%s/hook/%d", rc.URL, i) })
	filler := filepath.Join(dir, "filler")
	if out, err := exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=64k").CombinedOutput(); !strings.Contains(string(out), "No space left") {
		t.Fatalf("dd filling the tmpfs: %v: %s", err, out)
	}
	if out, err := hp.CLI("resume", rc.Host()); err != nil {
		t.Fatalf("resume: %v: %s\nhookpace's log:\n%s", err, out, hp.Log())
	}
	Poll(t, 20*time.Second, "a log line saying the resume went unrecorded", func() bool {
		return strings.Contains(hp.Log(), "resume not recorded")
	})
	return hp, rc, filler
}

// fault is the lines of a crashed Go program's output that say why.
func fault(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "SIGBUS") || strings.HasPrefix(l, "fatal error") || strings.HasPrefix(l, "unexpected fault") || strings.HasPrefix(l, "panic") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

package e2e

import (
	"os"
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
// whose deletes were held, again) once the host is resumed: the resume
// on the full disk went unrecorded, so the restart finds the host paused
// as last recorded. The test mounts a 32 MiB tmpfs, which needs root (as
// CI has); it fails without.
func TestShutdownWhileDiskFilledFromOutside(t *testing.T) {
	t.Parallel()
	const n = 200
	hp, rc, filler := filledDuringDeletes(t, "shutdown: {timeout: 3s}\n", n)
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
	if out, err := hp.CLI("resume", rc.Host()); err != nil {
		t.Fatalf("resume after the restart: %v: %s", err, out)
	}
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

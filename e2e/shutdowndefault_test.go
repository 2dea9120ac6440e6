package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// With no shutdown settings (a sidecar's ConfigMap as most
// teams write it), SIGTERM drains: a 5/s host's backlog is delivered; the
// drain ends once only a paused host's webhooks are left, rather than
// waiting out its 20 s; and the exit code and the log say how many are
// left, and where.
func TestDefaultShutdownDrains(t *testing.T) {
	t.Parallel()
	fast, paused := NewReceiver(t), NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 5/s, burst: 1, concurrency: 1}
`, fast.Host()))
	if out, err := hp.CLI("pause", paused.Host()); err != nil {
		t.Fatalf("pause: %v\n%s", err, out)
	}
	const n, held = 15, 3
	PostAll(t, hp, n, 4, func(i int) string { return fmt.Sprintf("%s/f/%d", fast.URL, i) })
	PostAll(t, hp, held, 1, func(i int) string { return fmt.Sprintf("%s/p/%d", paused.URL, i) })

	hp.Signal(syscall.SIGTERM)
	if code := hp.Wait(30 * time.Second); code != 1 {
		t.Fatalf("exit code %d with webhooks left, want 1\n%s", code, hp.Log())
	}
	log := hp.Log()
	if got := Delivered2xx(fast.Arrivals()); got != n {
		t.Errorf("the 5/s host got %d of %d by the exit", got, n)
	}
	if got := len(paused.Arrivals()); got != 0 {
		t.Errorf("the paused host got %d", got)
	}
	if !strings.Contains(log, "drain=20s") || !strings.Contains(log, "nothing can be sent before the drain ends") {
		t.Errorf("want a 20 s drain, ended when only the paused host's webhooks were left:\n%s", log)
	}
	if left := logInt(t, log, "webhooks left in the spool", "left"); left != held {
		t.Errorf("the log says %d left, want %d", left, held)
	}
	if spool := filepath.Join(hp.Dir, "spool"); !strings.Contains(log, "spool="+spool) {
		t.Errorf("the log does not name the spool directory %s:\n%s", spool, log)
	}
	if !strings.Contains(log, fmt.Sprintf("%d webhooks still queued in", held)) {
		t.Errorf("the exit does not say how many are left:\n%s", log)
	}
}

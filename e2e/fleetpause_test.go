package e2e

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
)

// A resume anywhere clears the pause everywhere, the durable
// record included. Replica A pauses a host it has nothing queued for,
// replica B (which never saw the host) resumes it, A restarts while Redis
// is down: A delivers to the host. Before, A's record still said paused,
// and A came back paused (0 of 5 delivered).
func TestFleetResumeElsewhereSurvivesRestart(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rc := NewReceiver(t)
	hps := startFleet(t, srv, 2, fmt.Sprintf(`"%s": {rate: 50/s, burst: 5, concurrency: 2}`, rc.Host()))
	a, b := hps[0], hps[1]
	if out, err := a.CLI("pause", rc.Host()); err != nil {
		t.Fatalf("hookpace pause at A: %v\n%s", err, out)
	}
	if h := hostOf(t, a, rc.Host()); !h.Paused {
		t.Fatalf("A after pausing: %+v", h)
	}
	if out, err := b.CLI("resume", rc.Host()); err != nil {
		t.Fatalf("hookpace resume at B: %v\n%s", err, out)
	}
	Poll(t, 10*time.Second, "A to hear of B's resume", func() bool { return !hostOf(t, a, rc.Host()).Paused })

	a.Signal(syscall.SIGTERM)
	if code := a.Wait(30 * time.Second); code != 0 {
		t.Fatalf("A exited %d\n%s", code, a.Log())
	}
	srv.Kill()
	a.Restart()
	PostAll(t, a, 5, 5, func(i int) string { return fmt.Sprintf("%s/after-restart/%d", rc.URL, i) })
	rc.WaitFor(t, 30*time.Second, "5 deliveries from A, restarted without Redis", func(as []Arrival) bool {
		return Delivered2xx(as) == 5
	})
}

package server

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestWithinLeavesAStuckStepBehind: a shutdown step that returns in time
// is waited for; one stuck past the deadline and the grace is left
// behind, and the shutdown goes on at the deadline plus the grace.
func TestWithinLeavesAStuckStepBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if !within(ctx, time.Second, func() { time.Sleep(3500 * time.Millisecond) }) {
			t.Error("a step that ended within the grace was left behind")
		}
		release := make(chan struct{})
		start := time.Now()
		ctx2, cancel2 := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel2()
		if within(ctx2, time.Second, func() { <-release }) {
			t.Error("a stuck step was reported done")
		}
		if took := time.Since(start); took != 4*time.Second {
			t.Errorf("gave up after %v, want the deadline plus the grace (4s)", took)
		}
		close(release)
	})
}

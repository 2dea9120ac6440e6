package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
)

// TestFleetBatchDrains: two replicas on one Redis, a host with a batch
// policy, 1,000 webhooks to 1,000 distinct paths (none can share a
// batch): every one arrives, once. A batching host's gathering asks
// nothing of its fleet gate, which asks the host's backlog with its own
// lock held.
func TestFleetBatchDrains(t *testing.T) {
	// Alone, not in parallel: see "Fleet bounds" in harness_test.go.
	srv := redistest.Start(t)
	rc := NewReceiver(t)
	hps := startFleet(t, srv, 2, fmt.Sprintf(
		`"%s": {rate: 200/s, burst: 50, concurrency: 8, batch: {max_events: 50, max_wait: 200ms, format: json-array}}`, rc.Host()))
	postSpread(t, hps, rc, "batched", 1000)
	fleetCheckOnce(t, rc, "batched", 1000, 60*time.Second)
}

package deliver

// Fairness cases seen from outside (e2e/lanes_test.go), held here at
// the dispatcher with a fake clock.

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// TestUntaggedBacklogThenKeyWaitsOneTurn: webhooks without a fairness
// key share the key "", a key like the others (README): a backlog
// without keys, its window (32 here) in memory, holds tenant B's first
// webhook back for one turn of "", not for the whole window
// (e2e: TestFairnessUntaggedBulkE2E).
func TestUntaggedBacklogThenKeyWaitsOneTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		_, q := setup(t, rc, map[string]Policy{"p.example": policy(10, 1, 1)}, 0)
		q.addLaned("p.example", "bulk", 300, nil)
		time.Sleep(time.Second) // a few of the backlog go first
		synctest.Wait()
		sent := len(rc.arrivals(""))
		q.addLaned("p.example", "one", 1, fairKey("tenant-b"))
		waitEmpty(t, q, 2*time.Minute)
		at := -1
		for i, tag := range tags(rc.arrivals("")) {
			if tag == "one" {
				at = i
			}
		}
		// As TestFairnessKeyWaitsOneTurn: staged, then one turn of "".
		if at < 0 || at > sent+2 {
			t.Fatalf("tenant-b's webhook was arrival %d; %d had gone when it came, want it within 2 after", at, sent)
		}
	})
}

// TestNormalBacklogThenHighGoesFirst: the same with priority. A host
// whose backlog so far was all normal is not in lanes; a high webhook
// then takes it into lanes, but waits behind the window already in
// h.ready (32 here) instead of going next.
func TestNormalBacklogThenHighGoesFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		_, q := setup(t, rc, map[string]Policy{"p.example": policy(10, 1, 1)}, 0)
		q.addLaned("p.example", "bulk", 300, nil)
		time.Sleep(time.Second)
		synctest.Wait()
		sent := len(rc.arrivals(""))
		q.addLaned("p.example", "high", 1, func(_ int, m *spool.Message) { m.Priority = spool.PriorityHigh })
		waitEmpty(t, q, 2*time.Minute)
		at := slices.Index(tags(rc.arrivals("")), "high")
		if at < 0 || at > sent+2 {
			t.Fatalf("the high webhook was arrival %d; %d had gone when it came, want it within 2 after", at, sent)
		}
	})
}

package handoff

import (
	"context"
	"time"
)

// LaneHeaders are the lane headers a hand-off sends (for the external
// test that checks them against the proxy's).
var LaneHeaders = []string{headerFairnessKey, headerOrderingKey, headerPriority, headerNotBefore}

// WithClock gives o the retries' clock of an external test: now, and the
// wait that sleep stands in for.
func WithClock(o *Options, now func() time.Time, sleep func(ctx context.Context, d time.Duration) bool) {
	o.now, o.sleep = now, sleep
}

package server

import (
	"testing"
	"time"

	"github.com/hookpace/hookpace/deliver"
)

func TestStuck(t *testing.T) {
	until := time.Date(2026, 11, 25, 12, 0, 20, 0, time.UTC)
	before, after := until.Add(-time.Second), until.Add(time.Second)
	paused := deliver.HostStatus{Host: "paused", Queued: 3, Paused: true}
	held := deliver.HostStatus{Host: "held", Queued: 2, HeldUntil: &after}
	open := deliver.HostStatus{Host: "open", Queued: 1, Breaker: "open", BreakerProbeAt: &after}
	empty := deliver.HostStatus{Host: "empty"}
	for _, tc := range []struct {
		name   string
		hosts  []deliver.HostStatus
		queued int64
		want   bool
	}{
		{"paused, held past the end, breaker probe past the end", []deliver.HostStatus{paused, held, open, empty}, 6, true},
		{"a host that can send", []deliver.HostStatus{paused, {Host: "ready", Queued: 1}}, 4, false},
		{"held until before the end", []deliver.HostStatus{{Host: "h", Queued: 1, HeldUntil: &before}}, 1, false},
		{"probe before the end", []deliver.HostStatus{{Host: "b", Queued: 1, Breaker: "open", BreakerProbeAt: &before}}, 1, false},
		{"in flight only", []deliver.HostStatus{{Host: "f", InFlight: 1}}, 1, false},
		{"webhooks no host accounts for", []deliver.HostStatus{paused}, 4, false},
		{"no hosts, nothing queued", nil, 0, true},
	} {
		if got := stuck(tc.hosts, tc.queued, until); got != tc.want {
			t.Errorf("%s: stuck = %v, want %v", tc.name, got, tc.want)
		}
	}
}

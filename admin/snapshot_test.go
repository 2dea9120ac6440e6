package admin

import (
	"testing"
	"time"
)

// A snapshot without ages reads no spool record; with ages, each host with
// a backlog gets its oldest webhook's time.
func TestTakeSnapshot(t *testing.T) {
	hosts := manyHosts{{Host: "a.example"}}
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	s := TakeSnapshot(hosts, emptySpool(t), now, false)
	if !s.At.Equal(now) || len(s.Hosts) != 1 || s.Oldest != nil || s.Dead != nil {
		t.Fatalf("without ages: %+v", s)
	}
	s = TakeSnapshot(hosts, emptySpool(t), now, true)
	if s.Oldest == nil || len(s.Oldest) != 0 || len(s.Problems) != 0 {
		t.Fatalf("with ages, nothing queued: %+v", s)
	}
}

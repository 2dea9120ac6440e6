package admin

import (
	"testing"
	"time"
)

// The metrics of one scrape, read by several callbacks, come from one
// snapshot: within its ttl Get serves the same one, then takes another.
func TestSnapshotsServeOnePerTTL(t *testing.T) {
	hosts := manyHosts{{Host: "a.example", Queued: 0}}
	s := NewSnapshots(hosts, emptySpool(t), time.Second)
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	first := s.Get(t0)
	if again := s.Get(t0.Add(999 * time.Millisecond)); again != first {
		t.Fatal("a second snapshot within the ttl")
	}
	if next := s.Get(t0.Add(time.Second)); next == first || !next.At.Equal(t0.Add(time.Second)) {
		t.Fatal("the same snapshot after the ttl")
	}
	if len(first.Hosts) != 1 || first.Hosts[0].Host != "a.example" || first.Oldest == nil {
		t.Fatalf("snapshot %+v", first)
	}
}

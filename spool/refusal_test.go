package spool

import (
	"context"
	"testing"
)

// The refusal is a typed value, and the readiness rule reads it: past the
// high-water mark, closed, or stopping is not ready, each with its why.
func TestRefusalAndReadiness(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{MaxMessages: 10, HighWater: 0.8, LowWater: 0.5})
	if ok, why := s.Usage().Ready(false); !ok || why != "" {
		t.Fatalf("empty spool: ready %v (%s)", ok, why)
	}
	if ok, why := s.Usage().Ready(true); ok || why != "shutting down" {
		t.Fatalf("stopping: ready %v (%s)", ok, why)
	}
	for i := range 8 {
		if err := s.Append(context.Background(), newMsg("h", i), 0); err != nil {
			t.Fatal(err)
		}
	}
	u := s.Usage()
	if ok, why := u.Ready(false); ok || u.Refusal != RefusalHighWater || u.Refusal.String() != "high_water" ||
		why != "past the high-water mark (80%); accepting again below the low-water mark (50%)" {
		t.Fatalf("at the high-water mark: ready %v, refusal %v (%s)", ok, u.Refusal, why)
	}
	s.Close()
	if u := s.Usage(); u.Refusal != RefusalClosed || u.Accepting {
		t.Fatalf("closed: refusal %v, accepting %v", u.Refusal, u.Accepting)
	}
}

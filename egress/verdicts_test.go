package egress

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"
)

// Verdicts remember admissions and refusals, never a resolution failure,
// and a Reset (a policy change) forgets them.
func TestVerdicts(t *testing.T) {
	calls := 0
	var answer error
	ask := func(context.Context, string, uint16) ([]netip.Addr, error) {
		calls++
		return nil, answer
	}
	v := NewVerdicts(time.Hour, 2)
	ctx := context.Background()
	for range 3 {
		if err := v.Check(ctx, "a.example", 443, ask); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 1 {
		t.Fatalf("%d asks for one host, want 1 (remembered)", calls)
	}
	answer = errors.New("dns: no such host")
	v.Check(ctx, "b.example", 443, ask)
	v.Check(ctx, "b.example", 443, ask)
	if calls != 3 {
		t.Fatalf("resolution failures were remembered (%d asks, want 3)", calls)
	}
	answer = &DeniedError{Host: "c.example", Reason: "loopback"}
	if err := v.Check(ctx, "c.example", 80, ask); !IsDenied(err) {
		t.Fatalf("refusal not returned: %v", err)
	}
	answer = nil
	if err := v.Check(ctx, "c.example", 80, ask); !IsDenied(err) {
		t.Fatalf("remembered refusal not returned: %v", err)
	}
	v.Reset()
	if err := v.Check(ctx, "c.example", 80, ask); err != nil {
		t.Fatalf("after a reset the new verdict should apply: %v", err)
	}
}

package fleet

import (
	"context"
	"slices"
	"testing"

	"github.com/hookpace/hookpace/internal/redistest"
)

// A resume leaves word of itself, so that a replica with the pause on
// record can tell it from a pause Redis lost (a restart without
// persistence), which says neither.
func TestPauseStates(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a, b := newLimiter(t, srv, clk, "a"), newLimiter(t, srv, clk, "b")
	ctx := context.Background()
	hosts := []string{"p.example", "r.example", "never.example"}
	states := func() []PauseState {
		t.Helper()
		s, err := b.PauseStates(ctx, hosts)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, h := range hosts[:2] {
		if err := a.Pause(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Resume(ctx, "r.example"); err != nil {
		t.Fatal(err)
	}
	if got := states(); !slices.Equal(got, []PauseState{Paused, Resumed, PauseUnknown}) {
		t.Fatalf("states %v", got)
	}
	if err := a.Pause(ctx, "r.example"); err != nil { // a pause again clears the resume
		t.Fatal(err)
	}
	if got := states(); got[1] != Paused {
		t.Fatalf("paused after a resume: %v", got[1])
	}
	if err := a.rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if got := states(); !slices.Equal(got, []PauseState{PauseUnknown, PauseUnknown, PauseUnknown}) {
		t.Fatalf("after Redis lost everything: %v", got)
	}
}

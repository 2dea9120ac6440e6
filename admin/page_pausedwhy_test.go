package admin

import (
	"testing"

	"github.com/hookpace/hookpace/deliver"
)

// A paused host's row says why it is paused (auto_pause_after).
func TestPageSaysWhyPaused(t *testing.T) {
	why := "auto_pause_after 10m0s: failing without a single success since 2026-11-25T15:00:00Z (last: status 502)"
	f := newFixture(t, deliver.HostStatus{Host: "auto.example", Paused: true, PausedWhy: why, Breaker: "closed"})
	rows, _, _, _ := f.render(t, "")
	for _, r := range rows {
		if r.attrs["data-host"] == "auto.example" {
			if want := "paused" + why; r.cells["hold"] != want {
				t.Errorf("hold cell %q, want %q", r.cells["hold"], want)
			}
			return
		}
	}
	t.Fatal("no row for auto.example")
}

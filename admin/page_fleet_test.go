package admin

import (
	"strings"
	"testing"

	"github.com/hookpace/hookpace/deliver"
)

// fleetHosts is a hostsTable whose dispatcher runs in fleet mode.
type fleetHosts struct {
	*hostsTable
	fleet *deliver.FleetStatus
}

func (h *fleetHosts) Fleet() *deliver.FleetStatus { return h.fleet }

func TestPageFleet(t *testing.T) {
	four := 4
	cases := []struct {
		name     string
		fleet    *deliver.FleetStatus // nil: not in fleet mode
		line     string               // #spool-fleet; "" absent
		inFlight string               // gone.example's in-flight cell
		degraded bool
	}{
		{name: "off", inFlight: "2"},
		{name: "shared", fleet: &deliver.FleetStatus{Replica: "r1", Live: 3, State: "shared"},
			line: "Fleet: replica r1 · 3 live replicas · shared through Redis", inFlight: "2 (fleet 4)"},
		{name: "degraded", fleet: &deliver.FleetStatus{Replica: "r2", Live: 2, Degraded: true,
			State: "degraded: local share 1/2", Error: "dial tcp 127.0.0.1:1: connection refused"},
			line:     "Fleet: replica r2 · 2 live replicas · degraded: local share 1/2 (redis: dial tcp 127.0.0.1:1: connection refused)",
			inFlight: "2 (fleet 4)", degraded: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.hosts.set("gone.example", func(s *deliver.HostStatus) {
				s.InFlight = 2
				if c.fleet != nil {
					s.FleetInFlight = &four
				}
			})
			if c.fleet != nil {
				f.page.api.Hosts = &fleetHosts{f.hosts, c.fleet}
			}
			rows, _, ids, body := f.render(t, "")
			line, ok := ids["spool-fleet"]
			if c.line == "" && ok {
				t.Errorf("fleet line %q without a fleet", line)
			}
			if c.line != "" && line != c.line {
				t.Errorf("fleet line %q, want %q", line, c.line)
			}
			if got := strings.Contains(body, `class="fleet fleet-degraded"`); got != c.degraded {
				t.Errorf("fleet line marked degraded: %v, want %v", got, c.degraded)
			}
			if got := strings.Contains(body, "here (fleet)"); got != (c.fleet != nil) {
				t.Errorf("in-flight header names the fleet: %v, want %v", got, c.fleet != nil)
			}
			for _, r := range rows {
				want := "0"
				if r.attrs["data-host"] == "gone.example" {
					want = c.inFlight
				}
				if got := strings.Join(strings.Fields(r.cells["in-flight"]), " "); got != want {
					t.Errorf("%s in flight %q, want %q", r.attrs["data-host"], got, want)
				}
			}
		})
	}
}

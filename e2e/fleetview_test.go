package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
)

// fleetViewPage is GET /v1/hosts?scope=fleet as the test reads it.
type fleetViewPage struct {
	Hosts []struct {
		Host      string `json:"host"`
		Queued    int    `json:"queued"`
		Delivered int    `json:"delivered"`
		Paused    bool   `json:"paused"`
		Replicas  []struct {
			Replica string `json:"replica"`
			Queued  int    `json:"queued"`
		} `json:"replicas"`
	} `json:"hosts"`
	Replicas   []string `json:"replicas"`
	NextCursor string   `json:"next_cursor"`
}

// TestFleetView checks the fleet's view: two real
// replicas on one Redis, one host paused with 3 webhooks queued at one
// replica and 5 at the other, another host delivered to. Either
// replica's `hookpace status --fleet` shows one line for the paused host
// with the fleet's 8 queued and each replica's part, and
// /v1/hosts?scope=fleet pages through both hosts.
func TestFleetView(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	paused, open := NewReceiver(t), NewReceiver(t)
	hps := startFleet(t, srv, 2, fmt.Sprintf("%q: {rate: 50/s}\n  %q: {rate: 50/s}", paused.Host(), open.Host()))
	if out, err := hps[0].CLI("pause", paused.Host()); err != nil {
		t.Fatalf("hookpace pause: %v\n%s", err, out)
	}
	for i, n := range []int{3, 5} {
		PostAll(t, hps[i], n, n, func(j int) string { return fmt.Sprintf("%s/held/%d", paused.URL, j) })
	}
	PostAll(t, hps[1], 4, 4, func(j int) string { return fmt.Sprintf("%s/sent/%d", open.URL, j) })
	open.WaitFor(t, 30*time.Second, "4 deliveries", func(as []Arrival) bool { return Delivered2xx(as) == 4 })

	var page fleetViewPage
	Poll(t, 30*time.Second, "the fleet's view to show 8 queued and 4 delivered", func() bool {
		page = fleetViewPage{}
		hps[1].AdminJSON("/v1/hosts?scope=fleet&limit=0", &page)
		return len(page.Hosts) == 2 && page.Hosts[0].Queued+page.Hosts[1].Queued == 8 &&
			page.Hosts[0].Delivered+page.Hosts[1].Delivered == 4
	})
	if len(page.Replicas) != 2 {
		t.Fatalf("view of %d replicas, want 2: %+v", len(page.Replicas), page)
	}
	for i, hp := range hps {
		out, err := hp.CLI("status", "--fleet")
		if err != nil {
			t.Fatalf("hookpace status --fleet at r%d: %v\n%s", i+1, err, out)
		}
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, paused.Host()+" ") {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 || !strings.Contains(lines[0], " 8 ") || !strings.Contains(lines[0], "paused") ||
			!strings.Contains(lines[0], "r1 3/0") || !strings.Contains(lines[0], "r2 5/0") {
			t.Fatalf("hookpace status --fleet at r%d: want one line for %s with 8 queued, paused, r1 3/0, r2 5/0:\n%s",
				i+1, paused.Host(), out)
		}
	}

	var first, second fleetViewPage
	hps[0].AdminJSON("/v1/hosts?scope=fleet&limit=1", &first)
	if len(first.Hosts) != 1 || first.NextCursor == "" {
		t.Fatalf("first page of one: %+v", first)
	}
	hps[0].AdminJSON("/v1/hosts?scope=fleet&limit=1&cursor="+first.NextCursor, &second)
	if len(second.Hosts) != 1 || second.Hosts[0].Host <= first.Hosts[0].Host {
		t.Fatalf("second page of one: %+v after %+v", second, first)
	}
	out, err := hps[0].CLI("status", "--fleet", "--json")
	var js struct{ Hosts []json.RawMessage }
	if err != nil || json.Unmarshal([]byte(out), &js) != nil || len(js.Hosts) != 2 {
		t.Fatalf("hookpace status --fleet --json (%v):\n%s", err, out)
	}
}

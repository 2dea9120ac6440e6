package e2e

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
)

// TestFleetStatusPage: two replicas sharing a partner's concurrency 4
// through a real Redis, each holding 2 webhooks at the partner. The status
// page (GET / on the admin address) names the replica and the live
// replicas, and shows this replica's in flight next to the fleet's.
func TestFleetStatusPage(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	release := make(chan struct{})
	rc := NewReceiver(t)
	rc.Handle = func(w http.ResponseWriter, r *http.Request, n int) { <-release }
	answer := sync.OnceFunc(func() { close(release) })
	defer answer()
	hps := startFleet(t, srv, 2, fmt.Sprintf(`"%s": {rate: 50/s, burst: 5, concurrency: 4, timeout: 60s}`, rc.Host()))
	// r1 takes its 2 leases first, then r2 its 2: r2's last grant counts
	// all 4 (a replica learns the fleet's count when it asks Redis).
	for i, hp := range hps {
		PostAll(t, hp, 2, 2, func(j int) string { return fmt.Sprintf("%s/fp/%d/%d", rc.URL, i, j) })
		// A held request notifies no WaitFor (the receiver notifies once it
		// answers): poll.
		Poll(t, 15*time.Second, fmt.Sprintf("%d held at the partner", 2*(i+1)), func() bool {
			return len(rc.Arrivals()) >= 2*(i+1)
		})
	}
	var line, cell string
	Poll(t, 10*time.Second, "r2's page shows 2 (fleet 4)", func() bool {
		line, cell = fleetOnPage(t, hps[1], rc.Host())
		return cell == "2 (fleet 4)"
	})
	if want := "Fleet: replica r2 · 2 live replicas · shared through Redis"; line != want {
		t.Fatalf("r2's fleet line %q, want %q", line, want)
	}
	line, cell = fleetOnPage(t, hps[0], rc.Host())
	if want := "Fleet: replica r1 · 2 live replicas · shared through Redis"; line != want {
		t.Fatalf("r1's fleet line %q, want %q", line, want)
	}
	if !regexp.MustCompile(`^2 \(fleet [2-4]\)$`).MatchString(cell) {
		t.Fatalf("r1's in-flight cell %q, want 2 (fleet 2..4)", cell)
	}
	answer()
	fleetCheckOnce(t, rc, "fp/0", 2, 15*time.Second)
	fleetCheckOnce(t, rc, "fp/1", 2, 15*time.Second)
}

var (
	tags       = regexp.MustCompile(`<[^>]*>`)
	fleetLine  = regexp.MustCompile(`(?s)<p [^>]*id="spool-fleet">(.*?)</p>`)
	inFlightTd = `(?s)<tr id="[^"]*" data-host="%s".*?data-col="in-flight">(.*?)</td>`
)

// fleetOnPage GETs the status page and returns the text of its fleet line
// and of host's in-flight cell.
func fleetOnPage(t *testing.T, hp *Hookpace, host string) (line, cell string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+hp.Admin+"/", nil)
	req.Header.Set("Accept", "text/html")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET / on %s: %s", hp.Admin, resp.Status)
	}
	plain := func(s string) string { return strings.Join(strings.Fields(tags.ReplaceAllString(s, "")), " ") }
	if m := fleetLine.FindStringSubmatch(string(b)); m != nil {
		line = plain(m[1])
	}
	if m := regexp.MustCompile(fmt.Sprintf(inFlightTd, regexp.QuoteMeta(host))).FindStringSubmatch(string(b)); m != nil {
		cell = plain(m[1])
	}
	return line, cell
}

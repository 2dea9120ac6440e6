package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Five low, then five high queued behind a pause: after the resume the
// first five delivered are the high ones.
func TestPriorityAfterPauseE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 20/s, burst: 1, concurrency: 4}
`, rc.Host()))
	pauseHost(t, hp, rc.Host())
	c := hp.Client()
	for _, prio := range []string{"low", "high"} {
		for i := range 5 {
			status, _, body := PostRaw(t, c, fmt.Sprintf("%s/%s/%d", rc.URL, prio, i), WebhookBody(i), http.Header{"Hookpace-Priority": {prio}})
			if status != http.StatusAccepted {
				t.Fatalf("POST %s %d: %d %s", prio, i, status, body)
			}
		}
		time.Sleep(200 * time.Millisecond) // the low ones are read in before the high ones come
	}
	resumeHost(t, hp, rc.Host())
	rc.WaitFor(t, 30*time.Second, "all ten delivered", func(as []Arrival) bool { return Delivered2xx(as) == 10 })
	var order []string
	for _, a := range rc.Arrivals() {
		order = append(order, strings.Split(a.Path, "/")[1])
	}
	if got := strings.Join(order[:5], " "); got != "high high high high high" {
		t.Fatalf("arrivals after the resume: %v; want the five high first", order)
	}
}

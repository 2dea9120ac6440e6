package e2e

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The inbound listener keeps OpenTelemetry's http.server.request.duration:
// three webhooks posted to a route are three POSTs answered 2xx, over
// http, in /metrics.
func TestInboundServerRequestDuration(t *testing.T) {
	t.Parallel()
	app := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
hosts:
  %q: {rate: 100/s}
inbound:
  - name: hooks
    listen: 127.0.0.1:0
    to: %s
    paths: ["/webhooks/*"]
`, app.Host(), app.URL))
	door := inboundAddrs(t, hp)["hooks"]
	if door == "" {
		t.Fatalf("no inbound listening line:\n%s", hp.Log())
	}
	c := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second}
	for i := range 3 {
		resp, err := c.Post("http://"+door+"/webhooks/in", "application/json", strings.NewReader(fmt.Sprintf(`{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("POST to the inbound route: %d", resp.StatusCode)
		}
	}
	re := regexp.MustCompile(`(?m)^http_server_request_duration_seconds_count\{([^}]*)\} (\d+)$`)
	total := 0
	for _, m := range re.FindAllStringSubmatch(hp.Metrics(), -1) {
		if strings.Contains(m[1], `http_request_method="POST"`) && strings.Contains(m[1], `url_scheme="http"`) &&
			strings.Contains(m[1], `http_response_status_code="2`) {
			n, _ := strconv.Atoi(m[2])
			total += n
		}
	}
	if total != 3 {
		t.Fatalf("http_server_request_duration_seconds_count of 2xx POSTs: %d, want 3\n%s", total, hp.Metrics())
	}
}

package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Hookpace status --host keeps the hosts whose name contains
// its text, and /v1/hosts pages with limit and cursor.
func TestStatusHostFilterAndPaging(t *testing.T) {
	t.Parallel()
	a, b := NewReceiver(t), NewReceiver(t)
	hp := Start(t, "egress: {allow: [\"127.0.0.0/8\"]}\n")
	for _, rc := range []*Receiver{a, b} {
		if status, _ := hp.Post(hp.Client(), rc.URL+"/h", []byte("{}"), nil); status != http.StatusAccepted {
			t.Fatalf("POST: %d", status)
		}
		rc.WaitFor(t, 10*time.Second, "the webhook", func(as []Arrival) bool { return len(as) == 1 })
	}
	out, err := hp.CLI("status", "--host", a.Host())
	if err != nil || !strings.Contains(out, a.Host()) || strings.Contains(out, b.Host()) {
		t.Fatalf("status --host %s: %v\n%s", a.Host(), err, out)
	}
	var page struct {
		Hosts      []struct{ Host string }
		Total      int
		NextCursor string `json:"next_cursor"`
	}
	hp.AdminJSON("/v1/hosts?limit=1", &page)
	first := page
	if len(first.Hosts) != 1 || first.Total != 2 || first.NextCursor == "" {
		t.Fatalf("limit=1: %+v, want one of 2 and a cursor", first)
	}
	page.Hosts, page.NextCursor = nil, ""
	hp.AdminJSON(fmt.Sprintf("/v1/hosts?limit=1&cursor=%s", first.NextCursor), &page)
	if len(page.Hosts) != 1 || page.Hosts[0].Host == first.Hosts[0].Host || page.NextCursor != "" {
		t.Fatalf("the second page: %+v after %+v", page, first)
	}
}

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
)

// notHere is the part of a 404 of GET /v1/messages/{id} for an id of
// another replica's spool that these tests read.
type notHere struct {
	Error     string `json:"error"`
	Elsewhere struct {
		Replica string `json:"replica"`
		Admin   string `json:"admin"`
		Live    bool   `json:"live"`
	} `json:"elsewhere"`
}

// Fleet: two real hookpace replicas on a real Redis. A
// webhook accepted by A and queued there: B's API names A, live, and its
// admin address, and hookpace msg show asked of B shows it from A. Then A
// stops and hands its queue off to B, which keeps the id: B finds it in
// its own journal; an id of A's that was delivered before says that A is
// no longer live.
func TestFleetMsgShow(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	secret := handoffSecret(t)
	rc := NewReceiver(t)
	cfg := func(name, shutdown string) string {
		return fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
fleet: {redis: "%s", replica: %s, lease_period: 3s, timeout: 900ms}
hosts:
  "%s": {rate: 1/h, burst: 1}
shutdown: {%s handoff_secret_file: %s}
`, srv.URL(), name, rc.Host(), shutdown, secret)
	}
	b := Start(t, cfg("r2", ""))
	a := Start(t, cfg("r1", fmt.Sprintf(`timeout: 10s, handoff: "http://%s",`, b.Proxy)))
	for _, hp := range []*Hookpace{a, b} {
		Poll(t, 10*time.Second, "2 live replicas", func() bool { return fleetOf(t, hp).Live == 2 })
	}
	ids := make([]string, 2)
	for i := range ids { // the first goes out (the fleet's burst); the second waits at A
		status, id := a.Post(a.Client(), fmt.Sprintf("%s/m/%d", rc.URL, i), WebhookBody(i), nil)
		if status != http.StatusAccepted || len(id) != 32 {
			t.Fatalf("webhook %d at A: %d %q", i, status, id)
		}
		ids[i] = id
	}
	rc.WaitFor(t, 10*time.Second, "the first delivery", func(as []Arrival) bool { return len(as) == 1 })

	nh := notHereAt(t, b, ids[1])
	if nh.Elsewhere.Replica != "r1" || !nh.Elsewhere.Live || nh.Elsewhere.Admin != a.Admin {
		t.Fatalf("A's queued webhook asked of B: %+v", nh)
	}
	out, err := b.CLI("msg", "show", ids[1])
	if err != nil || !strings.Contains(out, "(from replica r1 at "+a.Admin) || !strings.Contains(out, "/m/1") {
		t.Fatalf("msg show at B: %v\n%s", err, out)
	}

	a.Signal(syscall.SIGTERM)
	if code := a.Wait(30 * time.Second); code != 0 {
		t.Fatalf("A's exit code %d\n%s", code, a.Log())
	}
	m := lookup(t, b, ids[1])
	if m.ID != ids[1] || m.URL != rc.URL+"/m/1" || (m.State != "queued" && m.State != "held") {
		t.Fatalf("the handed-off webhook asked of B: %+v", m)
	}
	if out, err := b.CLI("msg", "show", ids[1]); err != nil || !strings.Contains(out, ids[1]) || strings.Contains(out, "from replica") {
		t.Fatalf("msg show at B after the hand-off: %v\n%s", err, out)
	}
	nh = notHereAt(t, b, ids[0])
	if nh.Elsewhere.Replica != "r1" || nh.Elsewhere.Live || !strings.Contains(nh.Error, "not live") {
		t.Fatalf("A's delivered webhook asked of B once A stopped: %+v", nh)
	}
	if out, err := b.CLI("msg", "show", ids[0]); err == nil || !strings.Contains(out, "replica r1") {
		t.Fatalf("msg show at B of A's delivered webhook once A stopped: %v\n%s", err, out)
	}
}

func notHereAt(t *testing.T, hp *Hookpace, id string) notHere {
	t.Helper()
	resp, err := http.Get("http://" + hp.Admin + "/v1/messages/" + url.PathEscape(id))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var nh notHere
	if resp.StatusCode != http.StatusNotFound || json.NewDecoder(resp.Body).Decode(&nh) != nil {
		t.Fatalf("GET /v1/messages/%s at %s: %d, want 404 with JSON", id, hp.Admin, resp.StatusCode)
	}
	return nh
}

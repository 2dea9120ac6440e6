package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookpace/hookpace/catchup/standin"
	"github.com/hookpace/hookpace/internal/proctest"
)

// countBy is how many 2xx arrivals carry each value of header h.
func countBy(as []Arrival, h string) map[string]int {
	out := map[string]int{}
	for _, a := range as {
		if a.Status >= 200 && a.Status < 300 {
			out[a.Header.Get(h)]++
		}
	}
	return out
}

// TestInboundCatchUpGitHub: a repository hook's first delivery of 5 of
// 20 events never reached hookpace, and a sixth reached it after GitHub
// stopped waiting. The route's catch-up, against a stand-in of GitHub's
// REST API, asks for 5 redeliveries (not the sixth: the spool knows its
// id), which arrive signed through the door; the app has all 20 exactly
// once, and further rounds ask for nothing.
func TestInboundCatchUpGitHub(t *testing.T) {
	t.Parallel()
	const secret = "It's a Secret to Everybody"
	dir := t.TempDir()
	for name, s := range map[string]string{"secret": secret, "token": "ghp_e2e_standin"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	app := NewReceiver(t)
	gh := &standin.GitHub{Secret: []byte(secret), Repo: "octo/hello", HookID: 42, Token: "ghp_e2e_standin", MaxPerPage: 7}
	api := httptest.NewServer(gh.Handler())
	defer api.Close()
	hp := Start(t, fmt.Sprintf(`
hosts:
  %q: {rate: 1000/s, burst: 100, concurrency: 4}
inbound:
  - name: github
    listen: 127.0.0.1:0
    to: %s
    paths: ["/webhooks/github"]
    verify: {scheme: github, secret_file: %s}
    dedupe: {header: X-GitHub-Delivery}
    catch_up:
      provider: github
      repo: octo/hello
      hook_id: 42
      token_file: %s
      api_url: %s
      every: 1s
`, app.Host(), app.URL, filepath.Join(dir, "secret"), filepath.Join(dir, "token"), api.URL))
	addr := inboundAddrs(t, hp)["github"]
	if addr == "" {
		t.Fatalf("no inbound listening line\n%s", hp.Log())
	}
	gh.SetTarget("http://" + addr + "/webhooks/github")
	lost := map[string]bool{}
	for i := range 20 {
		reach := standin.Reached
		switch i % 4 {
		case 1:
			reach = standin.Lost
		case 2:
			if i == 6 {
				reach = standin.Late
			}
		}
		guid := gh.Send("issues", "opened", fmt.Appendf(nil, `{"action":"opened","issue":{"number":%d}}`, i), reach)
		if reach == standin.Lost {
			lost[guid] = true
		}
	}
	app.WaitFor(t, 60*time.Second, "the app has 20 distinct deliveries", func(as []Arrival) bool {
		return len(countBy(as, "X-GitHub-Delivery")) == 20
	})
	// Two more rounds after the last redelivery: none asks for more.
	n := gh.Lists()
	Poll(t, 60*time.Second, "two more rounds of catch-up", func() bool { return gh.Lists() >= n+2*3 })
	got := countBy(app.Arrivals(), "X-GitHub-Delivery")
	for guid, k := range got {
		if k != 1 {
			t.Errorf("%s reached the app %d times", guid, k)
		}
	}
	for guid := range lost {
		if got[guid] != 1 {
			t.Errorf("lost delivery %s did not reach the app", guid)
		}
	}
	if r := gh.Redeliveries(); len(r) != 5 {
		t.Errorf("%d redeliveries asked (%v), want the 5 lost", len(r), r)
	}
	if !strings.Contains(hp.Log(), `msg=catch_up route=github provider=github listed=25 failed=1 seen=1 redelivered=0`) {
		t.Errorf("no round line says the late one is seen\n%s", hp.Log())
	}
	out, err := proctest.Command(binary, "check-config", hp.Config).CombinedOutput()
	if want := "catch-up: redelivers failed deliveries of octo/hello's hook 42, every 1s, looking back 24h0m0s, at " + api.URL; err != nil || !strings.Contains(string(out), want) {
		t.Errorf("check-config: %v, lacks %q:\n%s", err, want, out)
	}
}

// TestInboundCatchUpStripe: 3 of 10 Stripe events never reached
// hookpace. Catch-up, against a stand-in of Stripe's List all events,
// fetches them and takes them in through the route, marked
// Hookpace-Fetched: stripe (no Stripe-Signature); the app has all 10
// once. After a restart the kept cursor is where it resumes
// (ending_before): 2 more events, 1 missed, and the app has 12, once.
func TestInboundCatchUpStripe(t *testing.T) {
	t.Parallel()
	const secret = "whsec_e2e_standin"
	dir := t.TempDir()
	for name, s := range map[string]string{"whsec": secret, "sk": "sk_test_e2e"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	app := NewReceiver(t)
	st := &standin.Stripe{Key: "sk_test_e2e", Secret: secret}
	api := httptest.NewServer(st.Handler())
	defer api.Close()
	hp := Start(t, fmt.Sprintf(`
hosts:
  %q: {rate: 1000/s, burst: 100, concurrency: 4}
inbound:
  - name: stripe
    listen: 127.0.0.1:0
    to: %s
    paths: ["/webhooks/stripe"]
    verify: {scheme: stripe, secret_file: %s}
    dedupe: {json: id}
    catch_up: {provider: stripe, api_key_file: %s, api_url: %s, every: 1s}
`, app.Host(), app.URL, filepath.Join(dir, "whsec"), filepath.Join(dir, "sk"), api.URL))
	target := func() {
		addr := inboundAddrs(t, hp)["stripe"]
		if addr == "" {
			t.Fatalf("no inbound listening line\n%s", hp.Log())
		}
		st.SetTarget("http://" + addr + "/webhooks/stripe")
	}
	target()
	missed := map[string]bool{}
	for i := range 10 {
		lost := i == 1 || i == 4 || i == 8
		id := st.Emit("invoice.paid", map[string]any{"id": fmt.Sprintf("in_%d", i), "object": "invoice"}, lost)
		missed[id] = lost
	}
	check := func(n int) {
		t.Helper()
		app.WaitFor(t, 60*time.Second, fmt.Sprintf("the app has %d events", n), func(as []Arrival) bool {
			return len(eventIDs(as)) == n
		})
		for _, a := range app.Arrivals() {
			id := eventID(a)
			fetched, signed := a.Header.Get("Hookpace-Fetched"), a.Header.Get("Stripe-Signature")
			if missed[id] && (fetched != "stripe" || signed != "") || !missed[id] && (fetched != "" || signed == "") {
				t.Errorf("%s (missed %v): Hookpace-Fetched %q, Stripe-Signature %q", id, missed[id], fetched, signed)
			}
		}
	}
	check(10)
	hp.Signal(syscall.SIGTERM)
	if code := hp.Wait(60 * time.Second); code != 0 {
		t.Fatalf("hookpace exited %d on SIGTERM\n%s", code, hp.Log())
	}
	hp.Restart()
	target()
	missed[st.Emit("invoice.paid", map[string]any{"id": "in_10"}, false)] = false
	missed[st.Emit("invoice.paid", map[string]any{"id": "in_11"}, true)] = true
	check(12)
	for id, k := range eventIDs(app.Arrivals()) {
		if k != 1 {
			t.Errorf("%s reached the app %d times", id, k)
		}
	}
	// The restarted catch-up's first question is what came after the
	// kept cursor, not the whole window again.
	qs := st.Queries()
	var after []string
	for _, q := range qs {
		v, _ := url.ParseQuery(q)
		if v.Get("created[gte]") == "" {
			after = append(after, v.Get("ending_before"))
		}
	}
	if len(after) == 0 || after[0] == "" {
		t.Errorf("no round resumed from a cursor: %q", qs)
	}
	// The journal keeps the mark.
	var list struct {
		Messages []struct {
			ID string `json:"id"`
		} `json:"messages"`
	}
	hp.AdminJSON("/v1/messages?limit=100", &list)
	n := 0
	for _, m := range list.Messages {
		var msg struct {
			Header http.Header `json:"request_headers"`
		}
		hp.AdminJSON("/v1/messages/"+m.ID, &msg)
		if msg.Header.Get("Hookpace-Fetched") == "stripe" {
			n++
		}
	}
	if len(list.Messages) != 12 || n != 4 {
		t.Errorf("the journal has %d webhooks, %d marked Hookpace-Fetched: stripe; want 12, 4", len(list.Messages), n)
	}
}

// eventID is the Stripe event id of an arrival's body.
func eventID(a Arrival) string {
	var ev struct {
		ID string `json:"id"`
	}
	json.Unmarshal(a.Body, &ev)
	return ev.ID
}

func eventIDs(as []Arrival) map[string]int {
	out := map[string]int{}
	for _, a := range as {
		if a.Status >= 200 && a.Status < 300 {
			out[eventID(a)]++
		}
	}
	return out
}

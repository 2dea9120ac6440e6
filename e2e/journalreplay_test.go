package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// msgView is the part of `msg show --json` these tests read.
type msgView struct {
	ID       string
	State    string
	Attempts []struct{ Status int }
}

func msgShow(t *testing.T, hp *Hookpace, id string) msgView {
	t.Helper()
	out, err := hp.CLI("msg", "show", id, "--json")
	if err != nil {
		t.Fatalf("msg show %s: %v\n%s", id, err, out)
	}
	var v msgView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("msg show %s --json: %v\n%s", id, err, out)
	}
	return v
}

// A dead letter replayed and then delivered reads delivered in `msg show`
// and GET /v1/messages/{id}, with both attempts in order, and the journal
// lists it once, in that state.
func TestJournalReplayedDeadLetterDelivered(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	rc.Handle = func(w http.ResponseWriter, _ *http.Request, n int) {
		if n == 1 {
			w.WriteHeader(http.StatusGone) // permanent: dead at once
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	hp := Start(t, `
egress: {allow: ["127.0.0.0/8"]}
`)
	status, id := hp.Post(hp.Client(), rc.URL+"/orders", []byte(`{"order":1}`), http.Header{"Content-Type": {"application/json"}})
	if status != http.StatusAccepted {
		t.Fatalf("POST: %d", status)
	}
	Poll(t, 30*time.Second, "the dead letter", func() bool { return msgShow(t, hp, id).State == "dead" })
	if out, err := hp.CLI("dead", "replay", id); err != nil {
		t.Fatalf("dead replay: %v\n%s", err, out)
	}
	rc.WaitFor(t, 30*time.Second, "the replayed webhook", func(as []Arrival) bool { return Delivered2xx(as) == 1 })
	Poll(t, 30*time.Second, "msg show to read delivered", func() bool { return msgShow(t, hp, id).State == "delivered" })
	v := msgShow(t, hp, id)
	if v.ID != id || len(v.Attempts) != 2 || v.Attempts[0].Status != 410 || v.Attempts[1].Status != 200 {
		t.Fatalf("msg show %s: %+v; want its id, a 410 then a 200", id, v)
	}
	var api msgView
	hp.AdminJSON("/v1/messages/"+id, &api)
	if api.State != "delivered" || len(api.Attempts) != 2 {
		t.Fatalf("GET /v1/messages/%s: %+v", id, api)
	}
	var list struct{ Messages []msgView }
	hp.AdminJSON("/v1/messages", &list)
	if len(list.Messages) != 1 || list.Messages[0].ID != id || list.Messages[0].State != "delivered" {
		t.Fatalf("GET /v1/messages: %+v; want %s once, delivered", list.Messages, id)
	}
	if out, _ := hp.CLI("msg", "list", "--state", "dead"); strings.Contains(out, id) {
		t.Fatalf("msg list --state dead still shows %s:\n%s", id, out)
	}
}

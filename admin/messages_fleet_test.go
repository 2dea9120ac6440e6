package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/fleet"
	"github.com/hookpace/hookpace/internal/redistest"
	"github.com/hookpace/hookpace/spool"
)

// TestMessageOfAnotherReplica looks webhooks up on replica a of a fleet
// on a real Redis, with real spools: an id of b's spool gets a 404 naming
// b, live, and its admin API (and the client's error carries it); an id
// of a spool the fleet does not know, or asked without a fleet, says so;
// a webhook handed off to a (which keeps its id of b's spool) is found in
// a's journal; one that a handed off says where it went, its id there
// and which replica that is.
func TestMessageOfAnotherReplica(t *testing.T) {
	srv := redistest.Start(t)
	spA, spB := emptySpool(t), emptySpool(t)
	limiter := func(name string, sp *spool.Spool, addr string) *fleet.Limiter {
		l, err := fleet.New(fleet.Options{URL: srv.URL(), KeyPrefix: "t", Replica: name, Timeout: time.Second, LeasePeriod: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		l.Identify(sp.Instance(), addr)
		l.Start()
		t.Cleanup(func() { l.Close() })
		return l
	}
	la := limiter("a", spA, "127.0.0.1:9001")
	limiter("b", spB, "127.0.0.1:9002")
	api := httptest.NewServer(Handler(Options{Hosts: manyHosts(nil), Spool: spA, Journal: journalOf(spA), Fleet: la}))
	defer api.Close()
	alone := httptest.NewServer(Handler(Options{Hosts: manyHosts(nil), Spool: spA, Journal: journalOf(spA)}))
	defer alone.Close()

	onB := spool.Ref{Spool: spB.Instance(), Seq: 3}
	nh := notHere(t, api.URL, onB.String())
	if el := nh.Elsewhere; el.Replica != "b" || el.Admin != "127.0.0.1:9002" || !el.Live || el.Spool != spool.IDString(spB.Instance()) ||
		!strings.Contains(nh.Error, "replica b") || !strings.Contains(nh.Error, "ask it") {
		t.Fatalf("an id of b's spool: %+v %+v", nh, nh.Elsewhere)
	}
	_, err := NewClient(api.URL).Message(context.Background(), onB.String())
	var nhe *NotHereError
	if !errors.As(err, &nhe) || nhe.NotHere.Elsewhere.Admin != "127.0.0.1:9002" {
		t.Fatalf("client: %v", err)
	}
	if nh := notHere(t, api.URL, spool.Ref{Spool: 0x1234, Seq: 1}.String()); nh.Elsewhere.Replica != "" ||
		!strings.Contains(nh.Error, "no replica of this fleet") {
		t.Fatalf("an unknown spool: %+v", nh)
	}
	if nh := notHere(t, alone.URL, onB.String()); !strings.Contains(nh.Error, "not in a fleet") {
		t.Fatalf("without a fleet: %+v", nh)
	}

	// b handed a webhook off to a at its shutdown: a keeps its id.
	in := &spool.Message{Host: "p.example", Method: "POST", URL: "http://p.example/in", Body: []byte(`{}`),
		Enqueued: time.Now(), Origin: onB.Seq, OriginSpool: onB.Spool}
	if err := spA.Append(context.Background(), in, 0); err != nil {
		t.Fatal(err)
	}
	m := message(t, api.URL, onB.String())
	if m.ID != onB.String() || m.URL != "http://p.example/in" || m.State != spool.StateQueued {
		t.Fatalf("handed in: %+v", m)
	}

	// a hands one off to b, which gave it an id of its spool.
	out := &spool.Message{Host: "p.example", Method: "POST", URL: "http://p.example/out", Body: []byte(`{}`), Enqueued: time.Now()}
	if err := spA.Append(context.Background(), out, 0); err != nil {
		t.Fatal(err)
	}
	there := spool.Ref{Spool: spB.Instance(), Seq: 9}
	if err := spA.HandedOff(out, "hookpace at 127.0.0.1:8002 as "+there.String()); err != nil {
		t.Fatal(err)
	}
	m = message(t, api.URL, out.Ref().String())
	if h := m.HandedOff; m.State != spool.OutcomeHandedOff || h == nil || h.To != "127.0.0.1:8002" || h.ID != there.String() ||
		h.Replica != "b" || h.Admin != "127.0.0.1:9002" || !h.Live {
		t.Fatalf("handed off: %+v %+v", m, m.HandedOff)
	}
}

func notHere(t *testing.T, base, id string) NotHere {
	t.Helper()
	resp, err := http.Get(base + "/v1/messages/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var nh NotHere
	if err := json.NewDecoder(resp.Body).Decode(&nh); err != nil || resp.StatusCode != 404 || nh.Elsewhere == nil {
		t.Fatalf("%s: %d %+v %v", id, resp.StatusCode, nh, err)
	}
	return nh
}

func message(t *testing.T, base, id string) Message {
	t.Helper()
	m, err := NewClient(base).Message(context.Background(), id)
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	return m
}

package proxy

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/egress"
	"github.com/hookpace/hookpace/spool"
)

// TestDoorMarkAndKeys, on a real spool: only an inbound route marks what
// it stores as its door's, whatever a proxy client sends, and a proxy
// client's idempotency key never takes a route's delivery id.
func TestDoorMarkAndKeys(t *testing.T) {
	sp, err := openJournaled(spool.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	g, err := egress.New(egress.Options{Allow: []string{"127.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	hp := HostPolicy{Connect: ConnectTunnel, DedupeWindow: time.Hour}
	pol := Policy{Host: func(string) HostPolicy { return hp }, MaxBody: 1 << 20, Methods: []string{"POST"},
		IdempotencyHeader: "Idempotency-Key"}
	p := New(Options{Policy: pol, Spool: sp, Guard: g, Transport: &http.Transport{}, Logger: slog.New(slog.DiscardHandler)})

	// A proxy client: the forged mark is dropped; its key is its own.
	w := postBody(p, `{"id":"evt_1","forged":true}`, http.Header{spool.HeaderDoor: {"stripe"}, "Idempotency-Key": {"evt_1"}})
	if w.Code != http.StatusAccepted {
		t.Fatalf("proxy client: %d %s", w.Code, w.Body)
	}
	// The route's door, the provider's event with the same delivery id.
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:9/hook", strings.NewReader(`{"id":"evt_1"}`))
	w = httptest.NewRecorder()
	p.ServeInbound(w, r, Inbound{Route: "stripe", Key: "evt_1"})
	if w.Code != http.StatusAccepted || w.Header().Get(HeaderDuplicate) != "" {
		t.Fatalf("the route's event after a proxy client's key: %d %v %s", w.Code, w.Header(), w.Body)
	}
	// Its repeat is the route's duplicate.
	r = httptest.NewRequest(http.MethodPost, "http://127.0.0.1:9/hook", strings.NewReader(`{"id":"evt_1"}`))
	w = httptest.NewRecorder()
	p.ServeInbound(w, r, Inbound{Route: "stripe", Key: "evt_1"})
	if w.Code != http.StatusAccepted || w.Header().Get(HeaderDuplicate) != "true" {
		t.Fatalf("the route's repeat: %d %v", w.Code, w.Header())
	}
	ms, err := sp.Queued("127.0.0.1:9", 10)
	if err != nil || len(ms) != 2 {
		t.Fatalf("queued %d, %v; want 2", len(ms), err)
	}
	if got := ms[0].Header.Values(spool.HeaderDoor); len(got) != 0 {
		t.Errorf("the proxy client's webhook is marked %v", got)
	}
	if got := ms[1].Header.Values(spool.HeaderDoor); len(got) != 1 || got[0] != "stripe" {
		t.Errorf("the route's webhook is marked %v, want [stripe]", got)
	}
}

// TestInboundTargetsKeys, on a real spool: two targets of one route on
// one host each take a delivery id once (the id is theirs, not the
// host's), their copies carry the door's webhook id and their target,
// and a proxy client can forge neither mark.
func TestInboundTargetsKeys(t *testing.T) {
	sp, err := openJournaled(spool.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	g, err := egress.New(egress.Options{Allow: []string{"127.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	hp := HostPolicy{Connect: ConnectTunnel, DedupeWindow: time.Hour}
	pol := Policy{Host: func(string) HostPolicy { return hp }, MaxBody: 1 << 20, Methods: []string{"POST"}}
	p := New(Options{Policy: pol, Spool: sp, Guard: g, Transport: &http.Transport{}, Logger: slog.New(slog.DiscardHandler)})

	w := postBody(p, `{"id":"evt_1"}`, http.Header{spool.HeaderDoorWebhook: {"wh_forged"}, spool.HeaderDoorTarget: {"a"}})
	if w.Code != http.StatusAccepted {
		t.Fatalf("proxy client: %d %s", w.Code, w.Body)
	}
	take := func(path, target string) Taken {
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:9"+path, strings.NewReader(`{"id":"evt_1"}`))
		return p.TakeInbound(r, Inbound{Route: "fan", Key: "evt_1", Target: target, Webhook: "wh_1"})
	}
	a, b := take("/a", "a"), take("/b", "b")
	if !a.Accepted() || !b.Accepted() || a.ID == b.ID || a.Header.Get(HeaderDuplicate) != "" || b.Header.Get(HeaderDuplicate) != "" {
		t.Fatalf("the two targets' copies: %+v, %+v", a, b)
	}
	if again := take("/b", "b"); !again.Accepted() || again.ID != b.ID || again.Header.Get(HeaderDuplicate) != "true" {
		t.Fatalf("b's repeat: %+v, want a duplicate of %s", again, b.ID)
	}
	ms, err := sp.Queued("127.0.0.1:9", 10)
	if err != nil || len(ms) != 3 {
		t.Fatalf("queued %d, %v; want 3", len(ms), err)
	}
	if h := ms[0].Header; h.Get(spool.HeaderDoorWebhook) != "" || h.Get(spool.HeaderDoorTarget) != "" {
		t.Errorf("the proxy client's marks were kept: %v", h)
	}
	for i, want := range []string{"a", "b"} {
		h := ms[i+1].Header
		if h.Get(spool.HeaderDoorWebhook) != "wh_1" || h.Get(spool.HeaderDoorTarget) != want || h.Get(spool.HeaderDoor) != "fan" {
			t.Errorf("copy %d: %v", i, h)
		}
		if route, ok := spool.Door(h); !ok || route != "fan" || h.Get(spool.HeaderDoorWebhook) != "" || h.Get(spool.HeaderDoorTarget) != "" {
			t.Errorf("Door(copy %d) = %q, %v; left %v", i, route, ok, h)
		}
	}
}

package inbound

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/proxy"
	"github.com/hookpace/hookpace/spool"
)

// keyed is a spool's dedupe above the spool: a copy is stored once per
// (host, scope, key), a repeat with another body is the spool's
// conflict (422); both the Ingester and the Seer.
type keyed struct {
	mu     sync.Mutex
	bodies map[[3]string]string // (host, scope, key) -> body
	stored []string             // target, path and HeaderFetched of each copy stored
}

func (k *keyed) TakeInbound(r *http.Request, in proxy.Inbound) proxy.Taken {
	k.mu.Lock()
	defer k.mu.Unlock()
	b, _ := io.ReadAll(r.Body)
	scope := in.Route
	if in.Target != "" {
		scope += "\x00" + in.Target
	}
	id := [3]string{proxy.HostKey(r.URL), spool.DoorScope(scope), in.Key}
	if first, ok := k.bodies[id]; ok && in.Key != "" {
		if first != string(b) {
			return proxy.Taken{Status: http.StatusUnprocessableEntity, Header: http.Header{}, Body: []byte("conflict\n")}
		}
		return proxy.Taken{Status: http.StatusAccepted, Header: http.Header{proxy.HeaderDuplicate: {"true"}}}
	}
	k.bodies[id] = string(b)
	k.stored = append(k.stored, in.Target+" "+r.URL.Path+" "+r.Header.Get(HeaderFetched))
	return proxy.Taken{Status: http.StatusAccepted, Header: http.Header{}, ID: "id"}
}

func (k *keyed) Seen(host, scope, key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.bodies[[3]string{host, scope, key}]
	return ok
}

// TestTakeFetched: a fetched event goes through the route's filters and
// dedupe, marked; Seen knows what the door and catch-up took; a client
// cannot mark what it posts as fetched.
func TestTakeFetched(t *testing.T) {
	charge := "charge.succeeded"
	for _, tc := range []struct {
		name    string
		targets []config.InboundTarget
	}{
		{"one target", nil},
		{"fan-out", []config.InboundTarget{{Name: "a", URL: "http://a:1", Host: "a:1"},
			{Name: "b", URL: "http://b:1", Host: "b:1", Filter: &config.InboundFilter{JSON: "type", Equals: &charge}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &keyed{bodies: map[[3]string]string{}}
			appSaw := ""
			app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { appSaw = r.Header.Get(HeaderFetched) })
			rt, err := NewRoute(Options{Route: config.InboundRoute{Name: "stripe", To: "http://a:1", Host: "a:1",
				Targets: tc.targets, Dedupe: config.InboundDedupe{JSON: "id"}},
				Ingest: k, Seen: k, App: app, Metrics: noCount{},
				Logger: slog.New(slog.DiscardHandler), MaxBody: 1 << 10, Now: time.Now})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			post := func(body string) int {
				r := httptest.NewRequest("POST", "http://door/webhooks/stripe", strings.NewReader(body))
				r.Header.Set(HeaderFetched, "stripe")
				w := httptest.NewRecorder()
				rt.ServeHTTP(w, r)
				return w.Code
			}
			if rt.Seen("evt_1") {
				t.Fatal("seen before anything was taken")
			}
			if code := post(`{"id":"evt_1","type":"invoice.paid"}`); code != 202 {
				t.Fatalf("posted: %d", code)
			}
			if !rt.Seen("evt_1") || rt.Seen("evt_2") {
				t.Errorf("Seen evt_1 %v, evt_2 %v after evt_1 was posted", rt.Seen("evt_1"), rt.Seen("evt_2"))
			}
			// The same id rendered anew by the API: nothing stored, no refusal.
			if how, err := rt.TakeFetched(ctx, "stripe", "/webhooks/stripe", []byte(`{"id":"evt_1","type":"invoice.paid","pending_webhooks":0}`)); err != nil || how != FetchedDuplicate {
				t.Errorf("evt_1 fetched again: %v %v, want a duplicate", how, err)
			}
			if how, err := rt.TakeFetched(ctx, "stripe", "/webhooks//stripe", []byte(`{"id":"evt_2","type":"charge.succeeded"}`)); err != nil || how != FetchedStored {
				t.Errorf("evt_2 fetched: %v %v", how, err)
			}
			if how, err := rt.TakeFetched(ctx, "stripe", "/webhooks/stripe", []byte(`{"id":"evt_2","type":"charge.succeeded"}`)); err != nil || how != FetchedDuplicate {
				t.Errorf("evt_2 fetched twice: %v %v", how, err)
			}
			if !rt.Seen("evt_2") {
				t.Error("evt_2 not seen once fetched")
			}
			// The provider's own retry of a fetched event: 2xx, nothing stored.
			if code := post(`{"id":"evt_2","type":"charge.succeeded","pending_webhooks":1}`); code != 202 {
				t.Errorf("evt_2 posted after it was fetched: %d, want 202", code)
			}
			// Nor does a request the app answers itself carry a client's mark.
			r := httptest.NewRequest("GET", "http://door/webhooks/stripe", nil)
			r.Header.Set(HeaderFetched, "stripe")
			rt.ServeHTTP(httptest.NewRecorder(), r)
			if appSaw != "" {
				t.Errorf("the app got %s: %q", HeaderFetched, appSaw)
			}
			want := []string{" /webhooks/stripe ", " /webhooks/stripe stripe"}
			if tc.targets != nil {
				want = []string{"a /webhooks/stripe ", "a /webhooks/stripe stripe", "b /webhooks/stripe stripe"}
			}
			slices.Sort(k.stored) // the copies are taken concurrently
			if got := strings.Join(k.stored, "|"); got != strings.Join(want, "|") {
				t.Errorf("stored %q\nwant %q", k.stored, want)
			}
		})
	}
}

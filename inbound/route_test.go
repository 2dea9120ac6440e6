package inbound

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/webpath"
)

func TestRouteMatching(t *testing.T) {
	rt, err := NewRoute(Options{Route: config.InboundRoute{
		To:     "http://127.0.0.1:3000/app",
		Paths:  []string{"/webhooks/*", "/stripe"},
		Dedupe: config.InboundDedupe{JSON: "id"},
		Sync: []config.SyncRule{
			{JSON: "type", Value: "url_verification"},
			{Path: "/webhooks/commands", Method: "POST"},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want bool
	}{{"/webhooks/a", true}, {"/stripe", true}, {"/webhooks/a/b", true}, {"/", false}, {"/stripe/x", true},
		{"/Stripe/", true}, {"/stripex", false}, {"/webhooks", false}, {"/x/../stripe;v=1", true}} {
		p, err := webpath.Normalize(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := rt.webhookPath(p); got != tc.want {
			t.Errorf("webhookPath(%q) = %v", tc.path, got)
		}
	}
	u, _ := url.Parse("http://door/webhooks/a%2Fb?x=1&y=2")
	if got := appURL(rt.base, u).String(); got != "http://127.0.0.1:3000/app/webhooks/a%2Fb?x=1&y=2" {
		t.Errorf("appURL = %s", got)
	}
	doc := func(s string) map[string]json.RawMessage {
		var m map[string]json.RawMessage
		json.Unmarshal([]byte(s), &m)
		return m
	}
	post := func(p string) *http.Request { return &http.Request{Method: "POST", URL: &url.URL{Path: p}} }
	for _, tc := range []struct {
		r    *http.Request
		body string
		want bool
	}{
		{post("/webhooks/a"), `{"type":"url_verification","challenge":"c"}`, true},
		{post("/webhooks/a"), `{"type":"event_callback"}`, false},
		{post("/webhooks/a"), `{"type":1}`, false},
		{post("/webhooks/a"), `not json`, false},
		{post("/webhooks/commands"), `{}`, true},
	} {
		p, _ := webpath.Normalize(tc.r.URL.Path)
		if got := rt.syncRule(tc.r, p, doc(tc.body)); got != tc.want {
			t.Errorf("syncRule(%s, %s) = %v", tc.r.URL.Path, tc.body, got)
		}
	}
	for body, want := range map[string]string{`{"id":"evt_1"}`: "evt_1", `{"id":42}`: "42", `{"id":null}`: "", `{}`: "", `[1]`: ""} {
		if got := rt.deliveryID(http.Header{}, doc(body)); got != want {
			t.Errorf("deliveryID(%s) = %q, want %q", body, got, want)
		}
	}
	rt.opts.Route.Dedupe = config.InboundDedupe{Header: "X-GitHub-Delivery"}
	if got := rt.deliveryID(http.Header{"X-Github-Delivery": {"d1"}}, nil); got != "d1" {
		t.Errorf("deliveryID by header = %q", got)
	}
}

package inbound

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/proxy"
	"github.com/hookpace/hookpace/rewrite"
)

// copies records each target's copy the door hands to the spool, and
// answers for each host as told: the whole Ingester.
type copies struct {
	mu     sync.Mutex
	got    map[string]string // target -> URL, body and the X-Team header
	webhks map[string]bool   // the door's webhook ids seen
	status map[string]int    // by host; 0: 202
}

func (c *copies) TakeInbound(r *http.Request, in proxy.Inbound) proxy.Taken {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.status[r.URL.Host]; st != 0 {
		return proxy.Taken{Status: st, Header: http.Header{"Retry-After": {"5"}}, Body: []byte("hookpace: down\n")}
	}
	b, _ := io.ReadAll(r.Body)
	c.got[in.Target] = r.URL.String() + " " + string(b) + " " + r.Header.Get("X-Team")
	c.webhks[in.Webhook] = true
	return proxy.Taken{Status: http.StatusAccepted, Header: http.Header{}, ID: "id-" + in.Target}
}

func TestFanOut(t *testing.T) {
	secret, err := rewrite.ParsePath("$.secret")
	if err != nil {
		t.Fatal(err)
	}
	drop := &rewrite.JSON{Drop: []rewrite.Path{secret}}
	invoice := "invoice.paid"
	route := config.InboundRoute{Name: "fan", To: "http://a:1", Targets: []config.InboundTarget{
		{Name: "a", URL: "http://a:1"},
		{Name: "b", URL: "http://b:1/base", Rewrite: config.Rewrite{JSON: drop,
			Headers: &rewrite.Headers{Set: []rewrite.Header{{Name: "X-Team", Value: "billing"}}}}},
		{Name: "c", URL: "http://c:1", Filter: &config.InboundFilter{JSON: "type", Equals: &invoice}},
		{Name: "d", URL: "http://d:1", Filter: &config.InboundFilter{Header: "X-Event", Matches: regexp.MustCompile("^push$"), Path: "/hooks/git*"}},
	}}
	ing := &copies{}
	rt, err := NewRoute(Options{Route: route, Ingest: ing, App: http.NotFoundHandler(), Metrics: noCount{},
		Logger: slog.New(slog.DiscardHandler), MaxBody: 1 << 10, Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	post := func(path, body string, h http.Header) *httptest.ResponseRecorder {
		ing.got, ing.webhks = map[string]string{}, map[string]bool{}
		r := httptest.NewRequest(http.MethodPost, "http://door"+path, strings.NewReader(body))
		for k, v := range h {
			r.Header[k] = v
		}
		w := httptest.NewRecorder()
		rt.ServeHTTP(w, r)
		return w
	}

	w := post("/hooks/x", `{"type":"invoice.paid","secret":"s"}`, nil)
	if w.Code != http.StatusAccepted || w.Header().Get("X-Hookpace-Id") != "id-a, id-b, id-c" || len(ing.webhks) != 1 || ing.webhks[""] {
		t.Fatalf("an invoice: %d %v, webhook ids %v", w.Code, w.Header(), ing.webhks)
	}
	want := map[string]string{
		"a": `http://a:1/hooks/x {"type":"invoice.paid","secret":"s"} `,
		"b": `http://b:1/base/hooks/x {"type":"invoice.paid"} billing`,
		"c": `http://c:1/hooks/x {"type":"invoice.paid","secret":"s"} `,
	}
	for k, v := range want {
		if ing.got[k] != v {
			t.Errorf("target %s got %q, want %q", k, ing.got[k], v)
		}
	}
	if w := post("/hooks/github", `{}`, http.Header{"X-Event": {"push"}}); w.Code != http.StatusAccepted || ing.got["d"] == "" || ing.got["c"] != "" {
		t.Errorf("a push to d's path: %d, copies %v", w.Code, ing.got)
	}
	if post("/hooks/other", `{}`, http.Header{"X-Event": {"push"}}); ing.got["d"] != "" {
		t.Errorf("d took a push off its path: %v", ing.got)
	}

	// b's host refuses: the provider gets that refusal, to retry.
	ing.status = map[string]int{"b:1": http.StatusServiceUnavailable}
	if w := post("/hooks/x", `{"type":"x"}`, nil); w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "5" {
		t.Errorf("b down: %d %v, want b's 503", w.Code, w.Header())
	}

	// No target takes it: a 2xx that stores nothing.
	one := config.InboundRoute{Name: "one", To: "http://c:1", Targets: []config.InboundTarget{
		{Name: "c", URL: "http://c:1", Filter: &config.InboundFilter{JSON: "type", Equals: &invoice}}}}
	rt, err = NewRoute(Options{Route: one, Ingest: ing, App: http.NotFoundHandler(), Metrics: noCount{},
		Logger: slog.New(slog.DiscardHandler), MaxBody: 1 << 10, Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	if w := post("/hooks/x", `{"type":"customer.deleted"}`, nil); w.Code != http.StatusOK || len(ing.got) != 0 ||
		!strings.Contains(w.Body.String(), "nothing stored") {
		t.Errorf("no target takes it: %d %q, copies %v", w.Code, w.Body, ing.got)
	}
}

// TestFanOutRewriteRefusal: a body one target's rewrite can't apply to
// is refused with 400 before any target's copy is stored.
func TestFanOutRewriteRefusal(t *testing.T) {
	secret, err := rewrite.ParsePath("$.secret")
	if err != nil {
		t.Fatal(err)
	}
	route := config.InboundRoute{Name: "fan", To: "http://a:1", Targets: []config.InboundTarget{
		{Name: "a", URL: "http://a:1"},
		{Name: "b", URL: "http://b:1", Rewrite: config.Rewrite{JSON: &rewrite.JSON{Drop: []rewrite.Path{secret}}}},
	}}
	ing := &copies{got: map[string]string{}, webhks: map[string]bool{}}
	rt, err := NewRoute(Options{Route: route, Ingest: ing, App: http.NotFoundHandler(), Metrics: noCount{},
		Logger: slog.New(slog.DiscardHandler), MaxBody: 1 << 10, Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	rt.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "http://door/hooks", strings.NewReader("not json")))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `target "b"`) || len(ing.got) != 0 {
		t.Errorf("a body b's rewrite can't parse: %d %q, copies stored %v", w.Code, w.Body, ing.got)
	}
}

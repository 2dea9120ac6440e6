package proxy

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/egress"
	"github.com/hookpace/hookpace/rewrite"
	"github.com/hookpace/hookpace/spool"
)

// rewriteProxy is a proxy on a real spool whose every host drops
// $.customer.email and masks $.card.number, with dedupe on.
func rewriteProxy(t *testing.T) (*Proxy, *spool.Spool) {
	t.Helper()
	sp, err := openJournaled(spool.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	g, err := egress.New(egress.Options{Allow: []string{"127.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	drop, _ := rewrite.ParsePath("$.customer.email")
	mask, _ := rewrite.ParsePath("$.card.number")
	hp := HostPolicy{Connect: ConnectTunnel, DedupeWindow: time.Hour,
		Rewrite: &rewrite.JSON{Drop: []rewrite.Path{drop}, Mask: []rewrite.Path{mask}}}
	pol := Policy{Host: func(string) HostPolicy { return hp }, MaxBody: 1 << 20, Methods: []string{"POST"},
		IdempotencyHeader: "Idempotency-Key"}
	return New(Options{Policy: pol, Spool: sp, Guard: g, Transport: &http.Transport{}, Logger: slog.New(slog.DiscardHandler)}), sp
}

func postBody(p *Proxy, body string, h http.Header) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:9/hook", strings.NewReader(body))
	for k, vs := range h {
		r.Header[k] = vs
	}
	w := httptest.NewRecorder()
	p.ServeHTTP(w, r)
	return w
}

func TestRewriteAtIngest(t *testing.T) {
	p, sp := rewriteProxy(t)
	body := `{"id":"e1","customer":{"email":"ann@corp.example","name":"Ann"},"card":{"number":"4111111111111111"}}`
	w := postBody(p, body, http.Header{rewrite.AppliedHeader: {"forged by the app"}, "Idempotency-Key": {"k1"}})
	if w.Code != http.StatusAccepted {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	ms, err := sp.Queued("127.0.0.1:9", 10)
	if err != nil || len(ms) != 1 {
		t.Fatalf("queued %d, %v", len(ms), err)
	}
	want := `{"id":"e1","customer":{"name":"Ann"},"card":{"number":"[masked]"}}`
	if got := string(ms[0].Body); got != want {
		t.Errorf("stored %s\nwant   %s", got, want)
	}
	if got := ms[0].Header.Get(rewrite.AppliedHeader); got != "drop $.customer.email (1); mask $.card.number (1)" {
		t.Errorf("%s = %q", rewrite.AppliedHeader, got)
	}

	// The same key with another email: the bodies as stored are the same,
	// so this is a duplicate, not a conflict.
	again := strings.Replace(body, "ann@corp.example", "bob@corp.example", 1)
	w = postBody(p, again, http.Header{"Idempotency-Key": {"k1"}})
	if w.Code != http.StatusAccepted || w.Header().Get(HeaderDuplicate) != "true" {
		t.Errorf("same key, same body once rewritten: %d %v %s", w.Code, w.Header(), w.Body)
	}

	// Nothing matched: stored as it came, and no forged header either.
	w = postBody(p, `{"other": 1}`, http.Header{rewrite.AppliedHeader: {"forged"}})
	if w.Code != http.StatusAccepted {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	ms, _ = sp.Queued("127.0.0.1:9", 10)
	if len(ms) != 2 || string(ms[1].Body) != `{"other": 1}` || ms[1].Header.Get(rewrite.AppliedHeader) != "" {
		t.Errorf("untouched body: %d %q %v", len(ms), ms[len(ms)-1].Body, ms[len(ms)-1].Header)
	}
}

func TestRewriteNotJSON(t *testing.T) {
	p, sp := rewriteProxy(t)
	w := postBody(p, "email=ann@corp.example", nil)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "not JSON") {
		t.Errorf("non-JSON body: %d %s", w.Code, w.Body)
	}
	if ms, _ := sp.Queued("127.0.0.1:9", 10); len(ms) != 0 {
		t.Errorf("stored %d webhooks", len(ms))
	}
}

// rewrite.headers.remove is applied before the webhook is stored: the
// spooled message has neither the header nor its value; the others stay.
func TestRewriteHeadersRemovedAtIngest(t *testing.T) {
	sp, err := openJournaled(spool.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	g, err := egress.New(egress.Options{Allow: []string{"127.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	hp := HostPolicy{Connect: ConnectTunnel,
		RewriteHeaders: &rewrite.Headers{Remove: []string{"X-Internal-Trace"}, Set: []rewrite.Header{{Name: "X-Set", Value: "at-delivery"}}}}
	pol := Policy{Host: func(string) HostPolicy { return hp }, MaxBody: 1 << 20, Methods: []string{"POST"}}
	p := New(Options{Policy: pol, Spool: sp, Guard: g, Transport: &http.Transport{}, Logger: slog.New(slog.DiscardHandler)})
	w := postBody(p, `{}`, http.Header{"X-Internal-Trace": {"trace-secret-1"}, "X-Kept": {"kept"}})
	if w.Code != http.StatusAccepted {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	ms, err := sp.Queued("127.0.0.1:9", 10)
	if err != nil || len(ms) != 1 {
		t.Fatalf("queued %d, %v", len(ms), err)
	}
	if h := ms[0].Header; h.Get("X-Internal-Trace") != "" || h.Get("X-Kept") != "kept" || h.Get("X-Set") != "" {
		t.Errorf("stored headers %v: want X-Internal-Trace gone, X-Kept kept, X-Set not yet", h)
	}
}

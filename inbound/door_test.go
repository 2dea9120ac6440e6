package inbound

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/proxy"
)

// ingested records what the door hands to the spool: the whole Ingester.
type ingested struct{ urls []string }

func (g *ingested) TakeInbound(r *http.Request, in proxy.Inbound) proxy.Taken {
	g.urls = append(g.urls, r.Method+" "+r.URL.String()+" "+in.Route)
	return proxy.Taken{Status: http.StatusAccepted, Header: http.Header{}}
}

type noCount struct{}

func (noCount) InboundRejected(context.Context, string, string) {}

// answeredBody fails the test if the door reads a byte of it before it
// has answered w with 413 (it may read the rest after, to drain it).
type answeredBody struct {
	t *testing.T
	w *httptest.ResponseRecorder
}

func (b answeredBody) Read([]byte) (int, error) {
	if b.w.Code != http.StatusRequestEntityTooLarge || !b.w.Flushed {
		b.t.Error("the door read a body it had to refuse from Content-Length before answering 413")
	}
	return 0, io.EOF
}
func (answeredBody) Close() error { return nil }

// TestDoorJudgesTheRoutedPath: whatever path or method a forged webhook
// takes to the app's webhook path, it never reaches the app; what is off
// the webhook paths, and GET on them, does, with the path judged.
func TestDoorJudgesTheRoutedPath(t *testing.T) {
	const secret = "whsec_test"
	now := time.Unix(1700000000, 0)
	var app []string
	appH := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		app = append(app, r.Method+" "+r.URL.EscapedPath())
	})
	v, err := NewVerifier(VerifyOptions{Scheme: config.VerifyStripe, Secret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	ing := &ingested{}
	rt, err := NewRoute(Options{Route: config.InboundRoute{Name: "stripe", To: "http://127.0.0.1:3000",
		Paths: []string{"/webhooks/stripe"}, Passthrough: []string{"/webhooks/stripe/test"}},
		Verifier: v, Ingest: ing, App: appH, Metrics: noCount{}, Logger: slog.New(slog.DiscardHandler), MaxBody: 1 << 10, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"id":"evt_1"}`
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("1700000000." + body))
	good := "t=1700000000,v1=" + hex.EncodeToString(mac.Sum(nil))
	forged := "t=1700000000,v1=" + strings.Repeat("0", 64)
	for _, c := range []struct {
		method, target, sig string
		status              int
		app, ingest         string // what reached each, "" nothing
	}{
		{"POST", "/webhooks/stripe/", forged, 401, "", ""},
		{"POST", "/webhooks/stripe;x", forged, 401, "", ""},
		{"POST", "//webhooks/stripe", forged, 401, "", ""},
		{"POST", "/webhooks//stripe", forged, 401, "", ""},
		{"POST", "/Webhooks/stripe", forged, 401, "", ""},
		{"POST", "/webhooks/./stripe", forged, 401, "", ""},
		{"POST", "/x/../webhooks/stripe", forged, 401, "", ""},
		{"POST", "/webhooks/stripe%2F", forged, 401, "", ""},
		{"POST", "/webhooks/stripe/x", forged, 401, "", ""},
		{"PUT", "/webhooks/stripe", forged, 405, "", ""},
		{"PATCH", "/webhooks/stripe", forged, 405, "", ""},
		{"DELETE", "/webhooks/stripe", forged, 405, "", ""},
		{"post", "/webhooks/stripe", forged, 405, "", ""},
		{"PUT", "/webhooks/stripe", good, 405, "", ""},
		{"GET", "/health", "", 200, "GET /health", ""},
		{"GET", "/webhooks/stripe", "", 200, "GET /webhooks/stripe", ""},
		{"POST", "/api//orders/./1", "", 200, "POST /api/orders/1", ""},
		{"POST", "/webhooks/stripe/test", "", 200, "POST /webhooks/stripe/test", ""},
		{"POST", "/webhooks/stripe", good, 202, "", "POST http://127.0.0.1:3000/webhooks/stripe stripe"},
		{"POST", "/Webhooks/stripe;x/", good, 202, "", "POST http://127.0.0.1:3000/Webhooks/stripe stripe"},
	} {
		app, ing.urls = nil, nil
		r := httptest.NewRequest(c.method, "http://door"+c.target, strings.NewReader(body))
		if c.sig != "" {
			r.Header.Set("Stripe-Signature", c.sig)
		}
		w := httptest.NewRecorder()
		rt.ServeHTTP(w, r)
		got := strings.Join(app, ",") + "|" + strings.Join(ing.urls, ",")
		if w.Code != c.status || got != c.app+"|"+c.ingest {
			t.Errorf("%s %s: %d, app|spool %q; want %d, %q", c.method, c.target, w.Code, got, c.status, c.app+"|"+c.ingest)
		}
	}

	r := httptest.NewRequest("POST", "http://door/webhooks/stripe", nil)
	w := httptest.NewRecorder()
	r.Body, r.ContentLength = answeredBody{t, w}, 100<<20
	r.Header.Set("Content-Length", strconv.Itoa(100<<20))
	rt.ServeHTTP(w, r)
	if w.Code != http.StatusRequestEntityTooLarge || w.Header().Get("Connection") != "close" {
		t.Errorf("declared 100 MiB: %d %v, want 413 and Connection: close", w.Code, w.Header())
	}
}

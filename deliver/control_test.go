package deliver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// A webhook spooled with hookpace's queueing headers in its stored
// headers (as a version before lanes kept them) reaches the partner
// without any of them, and with the app's own headers.
func TestControlHeadersStrippedAtDelivery(t *testing.T) {
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
	defer srv.Close()
	_, q := journalSetup(t, policy(100, 10, 1))
	m := &spool.Message{Host: srv.Listener.Addr().String(), Method: "POST", URL: srv.URL + "/hook", Body: []byte(`{}`),
		Enqueued: time.Now(), Header: http.Header{"X-App": {"kept"}, "Hookpace-Received-At": {"2026-01-01T00:00:00Z"}}}
	for _, k := range spool.ControlHeaders {
		m.Header.Set(k, "from-an-old-record")
	}
	if err := q.Append(context.Background(), m, 0); err != nil {
		t.Fatal(err)
	}
	h := <-got
	for _, k := range spool.ControlHeaders {
		if v := h.Get(k); v != "" {
			t.Errorf("the partner got %s: %s", k, v)
		}
	}
	if h.Get("X-App") != "kept" || h.Get("Hookpace-Received-At") == "" {
		t.Errorf("the partner got %v: want X-App and Hookpace-Received-At", h)
	}
}

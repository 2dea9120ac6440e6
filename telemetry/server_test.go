package telemetry

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A listener's requests are counted in http.server.request.duration by
// method, scheme and status (error.type for a 5xx), whether the handler
// wrote a status or only a body; a flush reaches the writer underneath.
func TestServerRequestDuration(t *testing.T) {
	tel := newTelemetry(t, Options{})
	flushed := false
	h := tel.WrapServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/busy":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/flush":
			w.Write([]byte("part"))
			flushed = http.NewResponseController(w).Flush() == nil
		default:
			w.Write([]byte("ok"))
		}
	}), "https")
	srv := httptest.NewServer(h)
	for _, p := range []string{"/a", "/b", "/busy", "/flush"} {
		resp, err := http.Post(srv.URL+p, "application/json", strings.NewReader("{}"))
		if err != nil {
			srv.Close()
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// The client has the answers once they are flushed; the handlers and
	// what the wrapper records after them have returned once Close has.
	srv.Close()
	if !flushed {
		t.Error("the handler's flush did not reach the connection")
	}
	e := scrape(t, tel)
	count := func(status string) string {
		for k, v := range e.series {
			if strings.HasPrefix(k, "http_server_request_duration_seconds_count{") &&
				strings.Contains(k, `http_request_method="POST"`) && strings.Contains(k, `url_scheme="https"`) &&
				strings.Contains(k, `http_response_status_code="`+status+`"`) {
				if status == "503" && !strings.Contains(k, `error_type="503"`) {
					return "no error_type: " + k
				}
				return v
			}
		}
		return ""
	}
	if e.types["http_server_request_duration_seconds"] != "histogram" || count("200") != "3" || count("503") != "1" {
		t.Fatalf("http_server_request_duration_seconds: 200 %q, 503 %q; want 3 and 1\n%s", count("200"), count("503"), e.text)
	}
}

// A request's attribute set is looked up without an allocation once its
// key has been seen, and each key keeps the set it was first given.
func TestServerAttributeSetLookup(t *testing.T) {
	tel := newTelemetry(t, Options{})
	s := tel.WrapServer(http.NotFoundHandler(), "").(*serverHandler)
	ok := serverKey{method: "POST", scheme: "http", version: "1.1", status: http.StatusAccepted}
	busy := serverKey{method: "POST", scheme: "http", version: "1.1", status: http.StatusServiceUnavailable}
	first := s.attributeSet(ok)
	s.attributeSet(busy)
	if s.attributeSet(ok) != first {
		t.Error("a second key replaced the first key's set")
	}
	if n := testing.AllocsPerRun(100, func() { s.attributeSet(ok) }); n != 0 {
		t.Errorf("a seen key's lookup allocates %.0f times", n)
	}
	if n := len(*s.sets.Load()); n != 2 {
		t.Errorf("%d sets for 2 keys", n)
	}
}

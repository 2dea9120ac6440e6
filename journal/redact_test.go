package journal

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/spool"
)

// An entry's record keeps the request's headers as spool.RedactHeader
// shows them: the same allow-list.
func TestEntryRedactsHeadersByTheAllowList(t *testing.T) {
	h := http.Header{
		"Content-Type":          {"application/json"},
		"X-Jwt":                 {"eyJhbGciOi.x.y"},
		"X-Webhook-Hmac":        {"deadbeef"},
		"X-Custom":              {"anything"},
		"Location":              {"https://app.example/cb?code=abc123"},
		"X-Ratelimit-Remaining": {"7"},
		"Ratelimit-Policy":      {"10;w=1"},
		"Hookpace-Priority":     {"high"},
		"Accept-Encoding":       {"gzip"},
		"Retry-After":           {"3"},
		"Authorization":         {"Bearer t"},
	}
	want := spool.RedactHeader(h)
	if want.Get("Authorization") != spool.Redacted || want.Get("Content-Type") != "application/json" {
		t.Fatalf("RedactHeader: %v", want)
	}
	e := &Entry{Header: h}
	got, err := decodeEntry(1, e.encode())
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Header) != len(want) {
		t.Errorf("journal kept %d headers, want %d", len(got.Header), len(want))
	}
	for k, vs := range want {
		if g := got.Header.Get(k); g != strings.Join(vs, ", ") {
			t.Errorf("journal %s: %q, want %q", k, g, vs)
		}
	}
}

package proxy

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

func TestHostKey(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"http://API.Partner.example/hook", "api.partner.example"},
		{"http://api.partner.example:80/hook", "api.partner.example"},
		{"https://api.partner.example:443/hook", "api.partner.example"},
		{"http://hooks.other.example:8443/x", "hooks.other.example:8443"},
		{"https://hooks.other.example:80/x", "hooks.other.example:80"},
		{"http://127.0.0.1:9999/", "127.0.0.1:9999"},
		{"http://[::1]:8080/", "[::1]:8080"},
		{"http://[::1]/", "::1"},
		{"http://[0:0::1]:8080/", "[::1]:8080"}, // as config writes the key
		{"http://[2001:DB8:0::1]/", "2001:db8::1"},
		{"http://API.Partner.example./hook", "api.partner.example"},
		{"http://hooks.other.example.:8443/x", "hooks.other.example:8443"},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := HostKey(u); got != tc.want {
			t.Errorf("HostKey(%s) = %q, want %q", tc.url, got, tc.want)
		}
	}
}

func TestStoredHeader(t *testing.T) {
	in := http.Header{
		"Content-Type":            {"application/json"},
		"X-Signature":             {"sha256=abc"},
		"Connection":              {"keep-alive, X-Hop"},
		"X-Hop":                   {"1"},
		"Keep-Alive":              {"timeout=5"},
		"Proxy-Authorization":     {"Basic Zm9vOmJhcg=="},
		"Proxy-Connection":        {"keep-alive"},
		"Proxy-Custom":            {"x"},
		"Transfer-Encoding":       {"chunked"},
		"Te":                      {"trailers"},
		"Upgrade":                 {"h2c"},
		"Content-Length":          {"12"},
		"Expect":                  {"100-continue"},
		"X-Hookpace-Handoff-From": {"pod-a/0000000000000001"},
		"Traceparent":             {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}
	got := storedHeader(in)
	want := []string{"Content-Type", "X-Signature", "Traceparent"}
	if len(got) != len(want) {
		t.Fatalf("stored %v, want only %v", got, want)
	}
	for _, k := range want {
		if got.Get(k) != in.Get(k) {
			t.Errorf("%s: %q, want %q", k, got.Get(k), in.Get(k))
		}
	}
	if in.Get("Proxy-Authorization") == "" {
		t.Fatal("storedHeader modified its input")
	}
}

func TestParseBasic(t *testing.T) {
	for _, tc := range []struct {
		h, user, pass string
		ok            bool
	}{
		{"Basic YXBwOnMzY3JldA==", "app", "s3cret", true},
		{"basic YXBwOnMzY3JldA==", "app", "s3cret", true},
		{"Basic YXBwOjpjb2xvbg==", "app", ":colon", true},
		{"Bearer abc", "", "", false},
		{"Basic !!!", "", "", false},
		{"Basic YXBw", "", "", false}, // no colon
		{"", "", "", false},
	} {
		u, p, ok := parseBasic(tc.h)
		if u != tc.user || p != tc.pass || ok != tc.ok {
			t.Errorf("parseBasic(%q) = %q, %q, %v; want %q, %q, %v", tc.h, u, p, ok, tc.user, tc.pass, tc.ok)
		}
	}
}

type pacingFunc func(host string, n int64) (time.Duration, bool)

func (f pacingFunc) DrainTime(host string, n int64, _ time.Time) (time.Duration, bool) {
	return f(host, n)
}

// TestHostFullRetryAfter: a host at its max_queued gets the Retry-After its
// pacing gives, within bounds; the whole spool's estimate is the spool's.
func TestHostFullRetryAfter(t *testing.T) {
	var asked int64
	p := &Proxy{opts: Options{Pacing: pacingFunc(func(host string, n int64) (time.Duration, bool) {
		asked = n
		switch host {
		case "slow.example":
			return 11500 * time.Millisecond, true
		case "slower.example":
			return time.Hour, true
		case "fast.example":
			return 10 * time.Millisecond, true
		}
		return 0, false
	})}}
	for _, tc := range []struct {
		e    spool.FullError
		want string
	}{
		{spool.FullError{Host: "slow.example", Over: 2}, "12"},
		{spool.FullError{Host: "slower.example", Over: 1}, "300"},
		{spool.FullError{Host: "fast.example", Over: 1}, "1"},
		{spool.FullError{Host: "paused.example", Over: 1}, "30"},
		{spool.FullError{RetryAfter: 7 * time.Second}, "7"},
		{spool.FullError{NoEstimate: true}, "300"}, // nothing drains: the most it advises
	} {
		d := p.full(&tc.e)
		if d.status != http.StatusTooManyRequests || d.header.Get("Retry-After") != tc.want {
			t.Errorf("%+v: %d, Retry-After %q; want 429, %q", tc.e, d.status, d.header.Get("Retry-After"), tc.want)
		}
	}
	p.full(&spool.FullError{Host: "slow.example", Over: 3})
	if asked != 3 {
		t.Errorf("pacing asked about %d webhooks, want the 3 over", asked)
	}
}

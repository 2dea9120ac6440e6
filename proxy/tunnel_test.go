package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestTunnelURL(t *testing.T) {
	for _, tc := range []struct {
		target, host, uri string
		want              string // the absolute URL, or the error's start
		ok                bool
	}{
		{"partner.example:80", "partner.example", "/hook?x=1", "http://partner.example:80/hook?x=1", true},
		{"partner.example:80", "partner.example:80", "/hook", "http://partner.example:80/hook", true},
		{"partner.example:80", "", "/hook", "http://partner.example:80/hook", true},
		{"Partner.Example:8080", "partner.example:8080", "/", "http://Partner.Example:8080/", true},
		{"127.0.0.1:9999", "127.0.0.1:9999", "/hooks", "http://127.0.0.1:9999/hooks", true},
		{"[::1]:9999", "[::1]:9999", "/hooks", "http://[::1]:9999/hooks", true},
		{"partner.example:80", "http://partner.example/hook", "", "http://partner.example/hook", true}, // absolute-form inside
		{"partner.example:80", "other.example", "/hook", "request for other.example inside a tunnel to partner.example", false},
		{"partner.example:8080", "partner.example", "/hook", "request for partner.example inside a tunnel to partner.example:8080", false},
		{"partner.example:80", "http://other.example/hook", "", "request for other.example inside a tunnel to partner.example", false},
		{"partner.example:80", "https://partner.example:80/hook", "", "request for https://partner.example:80/hook inside a tunnel", false},
		{"partner.example:443", "https://partner.example/hook", "", "request for partner.example inside a tunnel to partner.example:443", false},
	} {
		in := &http.Request{Host: tc.host, URL: &url.URL{}}
		if strings.HasPrefix(tc.host, "http") {
			in.URL, _ = url.Parse(tc.host)
			in.Host = in.URL.Host
		} else {
			in.URL, _ = url.ParseRequestURI(tc.uri)
		}
		err := tunnelURL(in, tc.target, "http")
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s in a tunnel to %s: %v", tc.host, tc.target, err)
		case tc.ok && in.URL.String() != tc.want:
			t.Errorf("%s %s in a tunnel to %s: URL %s, want %s", tc.host, tc.uri, tc.target, in.URL, tc.want)
		case !tc.ok && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s in a tunnel to %s: error %v, want %q", tc.host, tc.target, err, tc.want)
		}
	}
}

func TestInnerServerTakesTheOuterLimits(t *testing.T) {
	outer := &http.Server{ReadHeaderTimeout: 7 * time.Second, ReadTimeout: 9 * time.Second, WriteTimeout: 11 * time.Second,
		IdleTimeout: 13 * time.Second, MaxHeaderBytes: 4096}
	connect := httptest.NewRequest(http.MethodConnect, "http://partner.example:80", nil)
	in := innerServer(connect.WithContext(context.WithValue(connect.Context(), http.ServerContextKey, outer)), http.NotFoundHandler())
	if in.ReadHeaderTimeout != 7*time.Second || in.ReadTimeout != 9*time.Second || in.WriteTimeout != 11*time.Second ||
		in.IdleTimeout != 13*time.Second || in.MaxHeaderBytes != 4096 {
		t.Errorf("inner server %+v does not hold the outer server's limits %+v", in, outer)
	}
	if in := innerServer(connect, http.NotFoundHandler()); in.ReadHeaderTimeout != sniffTimeout || in.IdleTimeout != 120*time.Second {
		t.Errorf("inner server without an outer one: %v header, %v idle", in.ReadHeaderTimeout, in.IdleTimeout)
	}
}

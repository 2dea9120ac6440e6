package egress

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// A pooled keep-alive connection does not outlive the policy: the next
// attempt over it is refused once the destination is denied.
func TestPolicyCheckedOnEveryAttempt(t *testing.T) {
	var got atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Add(1) }))
	var conns atomic.Int32
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	g, err := NewSwap([]string{"127.0.0.0/8"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Not tracked: a policy change leaves its idle connection open, so this
	// checks the per-attempt verdict alone.
	tr := &http.Transport{DialContext: g.DialContext}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: Checked{Policy: g, Next: tr}}
	send := func() error {
		resp, err := c.Post(srv.URL+"/h", "text/plain", strings.NewReader("x"))
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for range 2 {
		if err := send(); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Set([]string{"127.0.0.0/8"}, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	err = send()
	var denied *DeniedError
	if !errors.As(err, &denied) {
		t.Fatalf("after the deny: err = %v, want a refusal", err)
	}
	if n := got.Load(); n != 2 {
		t.Errorf("server got %d requests, want 2", n)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1 (kept alive)", n)
	}
}

// A policy change closes the idle connections of the tracked transports;
// a reload that leaves egress alone does not.
func TestPolicyChangeClosesIdleConnections(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	allow := []string{"127.0.0.0/8"}
	g, err := NewSwap(allow, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{DialContext: g.DialContext}
	g.Track(tr)
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: Checked{Policy: g, Next: tr}}
	send := func() {
		t.Helper()
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	send()
	g.Set(allow, nil) // a reload that leaves egress alone
	send()
	if n := conns.Load(); n != 1 {
		t.Errorf("after a reload without egress changes: %d connections, want 1", n)
	}
	g.Set([]string{"127.0.0.0/8", "10.0.0.0/8"}, nil)
	send()
	if n := conns.Load(); n != 2 {
		t.Errorf("after an egress change: %d connections, want 2 (the idle one closed)", n)
	}
}

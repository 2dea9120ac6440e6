package server

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/deliver"
)

func egressConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("t.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

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
	g, err := newSwapGuard(egressConfig(t, `egress: {allow: ["127.0.0.0/8"]}`))
	if err != nil {
		t.Fatal(err)
	}
	// Not tracked: a policy change leaves its idle connection open, so this
	// checks the per-attempt verdict alone.
	tr := &http.Transport{DialContext: g.DialContext}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: checkedTransport{g, tr}}
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
	if err := g.set(egressConfig(t, `egress: {allow: ["127.0.0.0/8"], deny: ["127.0.0.1"]}`)); err != nil {
		t.Fatal(err)
	}
	err = send()
	var ref deliver.Refusal
	if !errors.As(err, &ref) {
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
	allow := `egress: {allow: ["127.0.0.0/8"]}`
	g, err := newSwapGuard(egressConfig(t, allow))
	if err != nil {
		t.Fatal(err)
	}
	tr := transport(g, nil, false)
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: checkedTransport{g, tr}}
	send := func() {
		t.Helper()
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	send()
	g.set(egressConfig(t, allow+"\nlog: {level: debug}\n"))
	send()
	if n := conns.Load(); n != 1 {
		t.Errorf("after a reload without egress changes: %d connections, want 1", n)
	}
	g.set(egressConfig(t, `egress: {allow: ["127.0.0.0/8", "10.0.0.0/8"]}`))
	send()
	if n := conns.Load(); n != 2 {
		t.Errorf("after an egress change: %d connections, want 2 (the idle one closed)", n)
	}
}

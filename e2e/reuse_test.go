package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestConnectionsKeptPerHost: deliveries to more hosts than the old total
// idle bound (1,024) reuse each host's connection. 1,100 hosts at
// 127.0.x.y share one receiver that counts the connections it accepts;
// after a first round (one webhook each) has opened them, a second round
// opens them again (a host's first delivery's connection is not kept) and
// keeps them, and a third opens at most a tenth as many new connections as
// it delivers.
func TestConnectionsKeptPerHost(t *testing.T) {
	t.Parallel()
	const hosts = 1100
	var served, opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		served.Add(1)
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Config.IdleTimeout = 5 * time.Minute // the receiver never closes first
	// Every loopback address (127.0.x.y) reaches a listener on the
	// wildcard address; the test sends to loopback only.
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	hp := Start(t, `
egress: {allow: ["127.0.0.0/8"]}
defaults: {rate: 100/s, burst: 10}
`)
	target := func(i int) string {
		h := i % hosts
		return fmt.Sprintf("http://127.0.%d.%d:%s/hook/%d", 1+h/250, h%250+1, port, i)
	}
	round := func(r int) {
		PostAll(t, hp, hosts, 32, func(i int) string { return target(r*hosts + i) })
		want := int64((r + 1) * hosts)
		Poll(t, 60*time.Second, fmt.Sprintf("round %d delivered", r), func() bool { return served.Load() >= want })
	}
	round(0)
	round(1)
	first := opened.Load()
	round(2)
	again := opened.Load() - first
	t.Logf("rounds 1 and 2 opened %d connections, round 3 opened %d for %d deliveries", first, again, hosts)
	if again > hosts/10 {
		t.Fatalf("the third round to %d hosts opened %d new connections (at most %d): idle connections were not kept per host",
			hosts, again, hosts/10)
	}
}

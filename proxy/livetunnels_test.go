package proxy

import (
	"net"
	"path/filepath"
	"testing"

	"github.com/hookpace/hookpace/mitm"
)

// TestEndIntercepted: the spliced tunnels to a host that a new CONNECT
// would intercept are closed, both sides; the others stay open, and
// without a CA nothing is closed.
func TestEndIntercepted(t *testing.T) {
	names, _ := mitm.OpenNames(nil)
	ca, _, err := mitm.Ensure(filepath.Join(t.TempDir(), "mitm"), names, 10)
	if err != nil {
		t.Fatal(err)
	}
	pol := &Policy{Host: func(host string) HostPolicy {
		if host == "late.partner.test" || host == "10.0.0.1" {
			return HostPolicy{Connect: ConnectMITM}
		}
		return HostPolicy{Connect: ConnectTunnel}
	}}
	type pair struct {
		lt         *liveTunnel
		appSide    net.Conn
		remoteSide net.Conn
	}
	var l liveTunnels
	mk := func(host string) pair {
		a, b := net.Pipe()
		c, d := net.Pipe()
		lt := &liveTunnel{host: host, name: host, client: b, up: c}
		l.add(lt)
		return pair{lt, a, d}
	}
	late, other, ip := mk("late.partner.test"), mk("other.test"), mk("10.0.0.1")
	if got := l.endIntercepted(pol, nil); len(got) != 0 {
		t.Fatalf("closed %v without a CA", got)
	}
	got := l.endIntercepted(pol, ca)
	if len(got) != 1 || got["late.partner.test"] != 1 {
		t.Fatalf("closed %v, want late.test's one tunnel", got)
	}
	for _, c := range []net.Conn{late.appSide, late.remoteSide} {
		if _, err := c.Write([]byte("x")); err == nil {
			t.Error("late.test's tunnel is still open")
		}
	}
	// The other host (connect: tunnel) and the IP (never intercepted by the
	// open-world CA) keep their tunnels.
	for _, p := range []pair{other, ip} {
		go p.lt.client.Read(make([]byte, 1))
		if _, err := p.appSide.Write([]byte("x")); err != nil {
			t.Errorf("%s's tunnel was closed: %v", p.lt.host, err)
		}
	}
	if len(l.set) != 2 {
		t.Errorf("%d tunnels left in the book, want 2", len(l.set))
	}
}

package proxy

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"testing"
)

// A local address is shared by connections to different remotes: an
// app's connection captured from the address and port of one of
// hookpace's own live connections, to another destination, is the app's
// and is served, not refused as a loop.
func TestCaptureOwnAddressToAnotherDestination(t *testing.T) {
	p, sp := laneProxy(t, HostPolicy{}, nil, nil)
	addr := captureListener(t, p, func(netip.AddrPort) netip.AddrPort { return netip.MustParseAddrPort(laneHost) })
	partner := echoServer(t)

	// Two sockets bound to one address and port, as the kernel's own
	// choice makes for connections to different destinations.
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}
	reuse := func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
		}); err != nil {
			return err
		}
		return serr
	}
	own, err := OwnDial((&net.Dialer{LocalAddr: local, Control: reuse}).DialContext)(context.Background(), "tcp", partner.String())
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	local = own.LocalAddr().(*net.TCPAddr)
	app, err := (&net.Dialer{LocalAddr: local, Control: reuse}).Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	if app.LocalAddr().String() != own.LocalAddr().String() {
		t.Fatalf("the app's connection is from %s, hookpace's from %s", app.LocalAddr(), own.LocalAddr())
	}
	if resp := postOver(t, app, "http://"+laneHost+"/hook", laneHost); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the app's POST from hookpace's address and port: %s, want 202", resp.Status)
	}
	if p.Loops() != 0 || len(queued(t, sp)) != 1 {
		t.Errorf("%d loops, %d queued: want 0 and 1", p.Loops(), len(queued(t, sp)))
	}
	// The same pair of ends is hookpace's own.
	self := netip.MustParseAddrPort(addr)
	if src := own.LocalAddr().(*net.TCPAddr).AddrPort(); !isOwn(src, partner, self) || isOwn(src, netip.MustParseAddrPort(laneHost), self) {
		t.Errorf("isOwn(%s → %s) = %v, isOwn(%s → %s) = %v: want true, false", src, partner, isOwn(src, partner, self),
			src, laneHost, isOwn(src, netip.MustParseAddrPort(laneHost), self))
	}
}

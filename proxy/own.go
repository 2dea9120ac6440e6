package proxy

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
)

// DialFunc dials like net.Dialer.DialContext.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// ownConns are the TCP connections this process dialled and has not
// closed, by both their ends: a local address is shared by connections
// to different remotes (the kernel picks a port per destination), so the
// pair alone is one connection. A captured connection from src to dst
// that is one of them is hookpace's own, redirected back to itself: the
// capture rules do not exclude hookpace's uid (loop.go). It is
// process-wide: every connection of the process is its own, whichever
// part dialled it.
var ownConns sync.Map // ends -> uint64, the entry's token

// ends are a connection's local and remote addresses.
type ends struct{ local, remote netip.AddrPort }

// ownPort is a port bound by directDial, in its address family: a socket
// bound to the wildcard address holds the port against every other
// socket of the family, and IPv6 sockets are IPv6 only.
type ownPort struct {
	port uint16
	v6   bool
}

// ownPorts are the ports bound by directDial's connections before they
// connect.
var ownPorts sync.Map // ownPort -> uint64, the entry's token

// ownTokens tell one entry from a later one under the same key, so that
// a connection forgotten twice (closed, then collected) never removes its
// successor's entry.
var ownTokens atomic.Uint64

// OwnDial wraps next so that the connections it makes are known as
// hookpace's own until they are closed.
func OwnDial(next DialFunc) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc, ok := c.(*net.TCPConn)
		if !ok {
			return c, nil
		}
		la, ok := addrPort(tc.LocalAddr())
		ra, ok2 := addrPort(tc.RemoteAddr())
		if !ok || !ok2 {
			return c, nil
		}
		token := ownTokens.Add(1)
		ownConns.Store(ends{la, ra}, token)
		return newOwnConn(tc, ends{la, ra}, token), nil
	}
}

// isOwn reports whether a connection accepted from src, for dst, at the
// listener's address self, is one this process dialled: one of its
// connections from src to dst (redirected to self), or to self itself.
// A connection dialled through OwnDial is known once the dial returns,
// before its first byte is sent; one dialled by directDial before it is
// connected (its port is bound first, ownPorts).
func isOwn(src, dst, self netip.AddrPort) bool {
	if _, ok := ownConns.Load(ends{src, dst}); ok {
		return true
	}
	if _, ok := ownConns.Load(ends{src, self}); ok && self.IsValid() {
		return true
	}
	_, ok := ownPorts.Load(ownPort{src.Port(), !src.Addr().Is4()})
	return ok
}

// ownConn is a dialled connection, forgotten when closed, or when it is
// dropped unclosed and collected (its descriptor is then closed too). It
// embeds the *net.TCPConn so that io.Copy keeps its splice and sendfile
// paths and CloseWrite stays available.
type ownConn struct {
	*net.TCPConn
	forget func()
	once   sync.Once
}

func newOwnConn(tc *net.TCPConn, key any, token uint64) *ownConn {
	m := &ownConns
	if _, ok := key.(ownPort); ok {
		m = &ownPorts
	}
	c := &ownConn{TCPConn: tc, forget: func() { m.CompareAndDelete(key, token) }}
	runtime.AddCleanup(c, func(forget func()) { forget() }, c.forget)
	return c
}

func (c *ownConn) Close() error {
	c.once.Do(c.forget)
	return c.TCPConn.Close()
}

// ownGuard is a Guard whose dials are known as hookpace's own.
type ownGuard struct {
	Guard
	dial DialFunc
}

func newOwnGuard(g Guard) Guard {
	if g == nil {
		return nil
	}
	return ownGuard{Guard: g, dial: OwnDial(g.DialContext)}
}

func (g ownGuard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return g.dial(ctx, network, addr)
}

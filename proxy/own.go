package proxy

import (
	"context"
	"net"
	"net/netip"
	"sync"
)

// DialFunc dials like net.Dialer.DialContext.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// ownConns are the TCP connections this process dialled and has not
// closed, by their local address. A captured connection whose source is
// one of them is hookpace's own, redirected back to itself: the capture
// rules do not exclude hookpace's uid (loop.go). It is process-wide: every
// connection of the process is its own, whichever part dialled it.
var ownConns sync.Map // netip.AddrPort -> struct{}

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
		if !ok {
			return c, nil
		}
		ownConns.Store(la, struct{}{})
		return &ownConn{TCPConn: tc, local: la}, nil
	}
}

// isOwn reports whether src is the local address of a connection this
// process dialled. A connection dialled through OwnDial is known once the
// dial returns, before its first byte is sent; one dialled by directDial
// before it is connected (its port is bound first, ownPorts).
func isOwn(src netip.AddrPort) bool {
	if _, ok := ownConns.Load(src); ok {
		return true
	}
	_, ok := ownPorts.Load(src.Port())
	return ok
}

// ownPorts are the local ports bound by directDial's connections before
// they connect: a port bound so is no other socket's while it is held.
var ownPorts sync.Map // uint16 -> struct{}

// ownConn is a dialled connection, forgotten when closed. It embeds the
// *net.TCPConn so that io.Copy keeps its splice and sendfile paths and
// CloseWrite stays available.
type ownConn struct {
	*net.TCPConn
	local netip.AddrPort
	port  bool // known by its port (ownPorts), not its address
	once  sync.Once
}

func (c *ownConn) Close() error {
	c.once.Do(func() {
		if c.port {
			ownPorts.Delete(c.local.Port())
		} else {
			ownConns.Delete(c.local)
		}
	})
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

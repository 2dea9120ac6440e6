//go:build unix

package proxy

import (
	"context"
	"net"
	"slices"
	"sync"
	"syscall"
)

// boundPorts collects the ports bindOwn bound for one dial, with their
// entries' tokens.
type boundPorts struct {
	mu     sync.Mutex
	ports  []ownPort
	tokens []uint64
}

type boundKey struct{}

// bindOwn binds a socket about to be dialled to a port of the kernel's
// choosing and records the port in ownPorts before the connection exists:
// a connection captured back to hookpace is known as its own whenever it
// arrives. A port bound so is no other socket's while it is held.
func bindOwn(ctx context.Context, network, _ string, c syscall.RawConn) error {
	var err error
	cerr := c.Control(func(fd uintptr) {
		var sa syscall.Sockaddr = &syscall.SockaddrInet4{}
		if network == "tcp6" {
			sa = &syscall.SockaddrInet6{}
		}
		if err = syscall.Bind(int(fd), sa); err != nil {
			return
		}
		var got syscall.Sockaddr
		if got, err = syscall.Getsockname(int(fd)); err != nil {
			return
		}
		var port ownPort
		switch a := got.(type) {
		case *syscall.SockaddrInet4:
			port = ownPort{port: uint16(a.Port)}
		case *syscall.SockaddrInet6:
			port = ownPort{port: uint16(a.Port), v6: true}
		}
		token := ownTokens.Add(1)
		ownPorts.Store(port, token)
		if b, ok := ctx.Value(boundKey{}).(*boundPorts); ok {
			b.mu.Lock()
			b.ports = append(b.ports, port)
			b.tokens = append(b.tokens, token)
			b.mu.Unlock()
		}
	})
	if cerr != nil {
		return cerr
	}
	return err
}

// ownPortDial wraps a dialer whose ControlContext is bindOwn: the ports it
// recorded are forgotten when the connection closes, or when the dial
// fails.
func ownPortDial(next DialFunc) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		b := &boundPorts{}
		c, err := next(context.WithValue(ctx, boundKey{}, b), network, addr)
		b.mu.Lock()
		defer b.mu.Unlock()
		kept := -1
		if err == nil {
			if la, ok := addrPort(c.LocalAddr()); ok {
				kept = slices.Index(b.ports, ownPort{la.Port(), !la.Addr().Is4()})
			}
		}
		for i, p := range b.ports {
			if i != kept {
				ownPorts.CompareAndDelete(p, b.tokens[i])
			}
		}
		if err != nil {
			return nil, err
		}
		tc, ok := c.(*net.TCPConn)
		if !ok || kept < 0 {
			return c, nil
		}
		return newOwnConn(tc, b.ports[kept], b.tokens[kept]), nil
	}
}

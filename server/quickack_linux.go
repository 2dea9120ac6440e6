package server

import (
	"net"
	"syscall"
)

// Python's requests (urllib3) turns Nagle's algorithm off on a direct
// connection but leaves it on for a connection to a proxy, and it writes
// a POST's headers and its body in two sends. Nagle then holds the body
// until the headers' segment is acknowledged, and the kernel here delays
// that ACK (40 ms) once the connection looks interactive, that is from the
// second request on. Each webhook after the first took 44 ms instead of 1.
//
// quickAckListener's connections re-arm TCP_QUICKACK after each read that
// returned data, so that the ACK for it goes out at once and the client's
// next send is not held. It costs one setsockopt per read (measured in
// docs/performance-notebook.md, "Python's requests through the proxy"). Linux only;
// quickack_other.go leaves connections as they are.

// quickAckListener wraps each accepted TCP connection in a quickAckConn.
type quickAckListener struct{ net.Listener }

func (l quickAckListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return withQuickAck(c), nil
}

// withQuickAck wraps a TCP connection so that each read re-arms
// TCP_QUICKACK; anything else is returned as it is.
func withQuickAck(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	qc := &quickAckConn{Conn: c, raw: raw}
	qc.rearm()
	return qc
}

// quickAckConn is a TCP connection whose Read re-arms TCP_QUICKACK.
type quickAckConn struct {
	net.Conn
	raw syscall.RawConn
}

func (c *quickAckConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.rearm()
	}
	return n, err
}

func (c *quickAckConn) rearm() { c.raw.Control(setQuickAck) }

// setQuickAck is a func value made once, so that a rearm allocates
// nothing. An error (the socket closed meanwhile) changes nothing that
// the next read would not say.
var setQuickAck = func(fd uintptr) {
	syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
}

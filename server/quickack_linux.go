package server

import (
	"net"
	"sync/atomic"
	"syscall"
)

// Python's requests (urllib3) turns Nagle's algorithm off on a direct
// connection but leaves it on for a connection to a proxy, and it writes
// a POST's headers and its body in two sends. Nagle then holds the body
// until the headers' segment is acknowledged, and the kernel here delays
// that ACK (40 ms) once the connection looks interactive, that is from the
// second request on. Each webhook after the first took 44 ms instead of 1.
//
// quickAckListener's connections re-arm TCP_QUICKACK before a read that
// asks for more of what the client is sending while something it sent is
// still unacknowledged (read since hookpace last wrote to it), so that the
// ACK goes out at once and the client's next send is not held. A read
// after an answer needs none: the answer carried the ACK. So a client that
// sends each request in one piece costs no setsockopt per request, and a
// client that sends headers and body apart one per such read (measured in
// docs/performance.md, "Ingest against the group-commit floor"). Linux
// only; quickack_other.go leaves connections as they are.

// quickAckListener wraps each accepted TCP connection in a quickAckConn.
type quickAckListener struct{ net.Listener }

func (l quickAckListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return withQuickAck(c), nil
}

// withQuickAck wraps a TCP connection so that reads re-arm TCP_QUICKACK
// when an ACK may be pending; anything else is returned as it is.
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

// quickAckConn is a TCP connection whose Read re-arms TCP_QUICKACK when
// it waits for more while data it returned earlier may be unacknowledged.
type quickAckConn struct {
	net.Conn
	raw syscall.RawConn
	// unacked: a read returned data since the last write began. It is set
	// false before a write, so that data read meanwhile keeps it set: what
	// arrived before the write's segment is acknowledged by it.
	unacked atomic.Bool
}

// Read re-arms TCP_QUICKACK first when a read returned data since the last
// write, unless p is a single byte: net/http's read that only watches for
// the client going away while a handler runs wants nothing from the
// client, and the answer that follows carries the ACK. (net/http's 4 KiB
// read buffer asks for a single byte too when it holds 4,095 unread bytes
// of one request's headers; such a request may then wait for a delayed
// ACK once.)
func (c *quickAckConn) Read(p []byte) (int, error) {
	if len(p) > 1 && c.unacked.Load() {
		c.rearm()
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.unacked.Store(true)
	}
	return n, err
}

func (c *quickAckConn) Write(p []byte) (int, error) {
	c.unacked.Store(false)
	return c.Conn.Write(p)
}

func (c *quickAckConn) rearm() { c.raw.Control(setQuickAck) }

// setQuickAck is a func value made once, so that a rearm allocates
// nothing. An error (the socket closed meanwhile) changes nothing that
// the next read would not say.
var setQuickAck = func(fd uintptr) {
	syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
}

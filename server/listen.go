package server

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookpace/hookpace/config"
)

// What one client, or a flood of them, can take of the proxy listener is
// bounded: its open connections (proxy.max_connections, so that the admin
// listener, the spool and deliveries always have file descriptors) and the
// time a request's body may take (proxy.body_timeout). Accept errors (the
// descriptors ran out all the same) are logged once per burst.

// maxConnections is proxy.max_connections, or when 0 half the open-file
// limit, between 16 and 16384.
func maxConnections(cfg *config.Config) int {
	if n := cfg.Proxy.MaxConnections; n > 0 {
		return n
	}
	return min(max(openFileLimit()/2, 16), 16384)
}

// limitListener accepts at most cap(slots) connections at a time; further
// clients wait in the kernel's accept queue until one closes.
type limitListener struct {
	net.Listener
	slots  chan struct{}
	closed chan struct{}
	once   sync.Once
	errs   acceptErrors
}

func newLimitListener(ln net.Listener, n int, log *slog.Logger, name string) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, n), closed: make(chan struct{}),
		errs: acceptErrors{log: log, name: name}}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	l.errs.note(err)
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &slotConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// slotConn gives its slot back once, when closed.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// quietListener logs accept errors once per burst (the admin listener).
type quietListener struct {
	net.Listener
	errs acceptErrors
}

func (l *quietListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	l.errs.note(err)
	return c, err
}

// acceptErrors logs the first accept error of a burst, and when accepting
// works again, how many failed: "too many open files" is otherwise logged
// by http.Server every time it retries.
type acceptErrors struct {
	log    *slog.Logger
	name   string
	failed atomic.Int64
	since  atomic.Int64 // unix nanoseconds of the burst's first error
}

func (a *acceptErrors) note(err error) {
	if err == nil {
		if n := a.failed.Swap(0); n > 0 {
			a.log.Warn("accepting connections again", "listener", a.name, "failed_accepts", n,
				"for", time.Since(time.Unix(0, a.since.Load())).Round(time.Millisecond).String())
		}
		return
	}
	if errors.Is(err, net.ErrClosed) {
		return
	}
	if a.failed.Add(1) == 1 {
		a.since.Store(time.Now().UnixNano())
		a.log.Error("cannot accept connections; retrying (logged again when it recovers)", "listener", a.name, "error", err)
	}
}

// Package connlimit bounds what clients can take of a listener: its open
// connections, so that a flood of clients cannot take the file
// descriptors the rest of the process needs; and accept errors (the
// descriptors ran out all the same) are logged once per burst.
package connlimit

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Listener accepts at most n connections at a time (New); further clients
// wait in the kernel's accept queue until one closes.
type Listener struct {
	net.Listener
	slots  chan struct{}
	closed chan struct{}
	once   sync.Once
	errs   acceptErrors
}

// New limits ln to n connections at a time. Accept errors are logged to log
// once per burst, naming the listener name.
func New(ln net.Listener, n int, log *slog.Logger, name string) *Listener {
	return &Listener{Listener: ln, slots: make(chan struct{}, n), closed: make(chan struct{}),
		errs: acceptErrors{log: log, name: name}}
}

func (l *Listener) Accept() (net.Conn, error) {
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

func (l *Listener) Close() error {
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

// Quiet wraps ln so that its accept errors are logged once per burst, as
// New's are, with no limit (the admin listener).
func Quiet(ln net.Listener, log *slog.Logger, name string) net.Listener {
	return &quietListener{Listener: ln, errs: acceptErrors{log: log, name: name}}
}

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

package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// speculateAfter is how long hookpace waits for the client's first bytes,
// on a connection it decides by them, before it also dials the
// destination. A protocol where the server speaks first (SMTP, MySQL,
// FTP, an SSH server's banner) sends nothing until its server has, and
// HTTP and TLS servers never speak first: from then on the first side to
// speak decides. A server's greeting is passed on at once and the
// connection spliced; the client's bytes are read as always. A client
// that is merely slow costs one connection to the destination, which a
// splice uses and anything else closes.
const speculateAfter = 100 * time.Millisecond

// opening is how a connection hookpace decides by its first bytes began.
type opening struct {
	client []byte // the client's first bytes; nil when it sent none
	err    error  // why the client's read ended without a byte (closed), if it did
	// up is the destination, dialled while the client said nothing, for
	// a splice to use; nil when not dialled. Whoever does not splice
	// closes it (close).
	up net.Conn
	// greeting is what up sent before the client spoke: the server speaks
	// first, and the connection is spliced with it passed on first.
	greeting []byte
}

// serverFirst reports that the client sent nothing before the server
// spoke, the wait ran out or it half-closed its side (its server may
// still answer): a connection to splice as it is.
func (o *opening) serverFirst() bool {
	return len(o.greeting) > 0 || len(o.client) == 0 && (o.err == nil || o.err == io.EOF)
}

// close closes up unless a splice took it.
func (o *opening) close() {
	if o.up != nil {
		o.up.Close()
		o.up = nil
	}
}

// take hands up to a splice.
func (o *opening) take() net.Conn {
	up := o.up
	o.up = nil
	return up
}

// awaitOpening reads conn's first bytes until deadline. When the client
// has said nothing for speculateAfter, it dials the destination (unless
// up, dialled already, is given) while it goes on reading the client, and
// reads from the destination once connected: whichever speaks first ends
// the wait (both may have). A client that speaks while the dial is under
// way abandons it; a dial that fails leaves only the client to wait for.
// Deadlines are cleared on return.
func awaitOpening(conn, up net.Conn, deadline time.Time, dial func(context.Context) (net.Conn, error)) opening {
	buf := make([]byte, 512)
	conn.SetReadDeadline(earliest(deadline, time.Now().Add(speculateAfter)))
	n, err := conn.Read(buf)
	if n > 0 || !timedOut(err) || !time.Now().Before(deadline) {
		conn.SetReadDeadline(time.Time{})
		o := opening{up: up}
		o.client, o.err = clientBytes(buf[:n], err)
		return o
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	type heard struct {
		up       net.Conn
		greeting []byte
	}
	var (
		mu      sync.Mutex
		reading net.Conn // up, once its read has begun
		stopped bool     // the client has spoken, or the wait is over
	)
	heardc := make(chan heard, 1)
	// Set before the destination's reader starts: its greeting sets an
	// earlier deadline, which this must never override.
	conn.SetReadDeadline(deadline)
	go func() {
		up := up
		if up == nil {
			c, err := dial(ctx)
			if err != nil {
				heardc <- heard{}
				return
			}
			up = c
		}
		mu.Lock()
		if stopped {
			mu.Unlock()
			heardc <- heard{up: up}
			return
		}
		reading = up
		up.SetReadDeadline(deadline)
		mu.Unlock()
		g := make([]byte, 512)
		n, _ := up.Read(g) // a server that closes has said nothing
		if n > 0 {
			conn.SetReadDeadline(time.Now()) // the server spoke first
		}
		heardc <- heard{up: up, greeting: g[:n]}
	}()
	n, err = conn.Read(buf)
	mu.Lock()
	stopped = true
	if reading != nil {
		reading.SetReadDeadline(time.Now())
	}
	mu.Unlock()
	cancel() // a dial still under way is abandoned
	h := <-heardc
	conn.SetReadDeadline(time.Time{})
	o := opening{up: h.up}
	if o.up != nil {
		o.up.SetReadDeadline(time.Time{})
	}
	if len(h.greeting) > 0 {
		o.greeting = h.greeting
	}
	o.client, o.err = clientBytes(buf[:n], err)
	return o
}

// clientBytes is what a read of the client's first bytes says: the bytes,
// or the error that ended it unless that was the wait running out.
func clientBytes(b []byte, err error) ([]byte, error) {
	if len(b) > 0 {
		return b, nil
	}
	if timedOut(err) {
		return nil, nil
	}
	return nil, err
}

func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

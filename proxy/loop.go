package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"time"
)

// A captured connection that hookpace itself dialled (a delivery, a
// request forwarded, a splice) means the capture rules do not exclude
// hookpace's uid: served, each delivery of a plain-HTTP webhook would be
// answered 202 and spooled again as a new webhook, forever, and the
// partner would get nothing. Such a connection is refused: each request on
// it gets 508 Loop Detected and the connection is closed, so the delivery
// fails and is retried, nothing is spooled, and once the rules are fixed
// the retry's new connection goes out. TLS gets a fatal alert.

// Loops is how many of hookpace's own connections were captured back to
// it and refused since the start.
func (p *Proxy) Loops() int64 { return p.loops.Load() }

// loopReason is the refusal's reason, naming the likely cause.
func loopReason() string {
	return "capture: hookpace's own connection was captured back to it (a loop): the capture rules' --exclude-uid is not hookpace's uid " +
		strconv.Itoa(os.Geteuid()) + "; run hookpace capture rules --exclude-uid " + strconv.Itoa(os.Geteuid()) + " --apply"
}

// refuseLoop refuses one of hookpace's own connections captured back to
// it, counts it and, the first time, says why at error level.
func (p *Proxy) refuseLoop(req *http.Request, conn net.Conn, dst netip.AddrPort, start time.Time) {
	defer conn.Close()
	reason := loopReason()
	if p.loops.Add(1) == 1 {
		p.log.Error("capture: loop: hookpace's own connections are captured back to it; they are refused with 508 Loop Detected, nothing is spooled again",
			"destination", dst.String(), "cause", reason)
	}
	p.countTunnel(req.Context(), dst.String(), TunnelRefused, reason)
	p.record(req, start, dst.String(), 0, decision{outcome: outcomeRefused, status: http.StatusLoopDetected, reason: reason})
	conn.SetDeadline(time.Now().Add(sniffTimeout))
	br := bufio.NewReader(conn)
	first, err := br.Peek(1)
	if err != nil {
		return
	}
	if first[0] == tlsHandshake {
		conn.Write([]byte{21, 3, 3, 0, 2, 2, 80}) // a fatal internal_error alert
		return
	}
	r, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	// The body is read (to a bound) so that closing the connection does
	// not reset it before the client reads the answer.
	io.CopyN(io.Discard, r.Body, 1<<20)
	body := "hookpace: " + reason + "\n"
	fmt.Fprintf(conn, "HTTP/1.1 508 Loop Detected\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

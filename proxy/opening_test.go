package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestAwaitOpening: whichever side of a connection speaks first decides,
// and the destination is dialled only once the client has been silent
// for speculateAfter. Time is synctest's: each case says when the wait
// ends, exactly.
func TestAwaitOpening(t *testing.T) {
	const wait = 5 * time.Second
	for _, tc := range []struct {
		name           string
		clientAfter    time.Duration // when the client speaks; 0: never
		clientCloses   bool
		serverAfter    time.Duration // when the server, once dialled, speaks; 0: never
		dialFails      bool
		dialHangs      bool // until abandoned
		dialled        bool // up given, dialled already
		wantDials      int
		wantClient     string
		wantGreeting   string
		wantFirst      bool // serverFirst
		wantDone       time.Duration
		wantUp, wantEO bool
	}{
		{name: "client at once", clientAfter: 10 * time.Millisecond, wantClient: "hello", wantDone: 10 * time.Millisecond},
		{name: "server first", serverAfter: time.Millisecond, wantDials: 1, wantGreeting: "220 ready\r\n", wantFirst: true,
			wantDone: speculateAfter + time.Millisecond, wantUp: true},
		{name: "slow client", clientAfter: 300 * time.Millisecond, wantDials: 1, wantClient: "hello", wantDone: 300 * time.Millisecond, wantUp: true},
		{name: "nobody", wantDials: 1, wantFirst: true, wantDone: wait, wantUp: true},
		{name: "client closes", clientAfter: 200 * time.Millisecond, clientCloses: true, wantDials: 1, wantFirst: true, wantDone: 200 * time.Millisecond, wantUp: true, wantEO: true},
		{name: "dial fails", clientAfter: time.Second, dialFails: true, wantDials: 1, wantClient: "hello", wantDone: time.Second},
		{name: "dial hangs", clientAfter: 300 * time.Millisecond, dialHangs: true, wantDials: 1, wantClient: "hello", wantDone: 300 * time.Millisecond},
		{name: "dialled already", serverAfter: 2 * time.Second, dialled: true, wantGreeting: "220 ready\r\n", wantFirst: true,
			wantDone: 2 * time.Second, wantUp: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				conn, app := net.Pipe()
				defer conn.Close()
				defer app.Close()
				go func() {
					if tc.clientAfter == 0 {
						return
					}
					time.Sleep(tc.clientAfter)
					if tc.clientCloses {
						app.Close()
						return
					}
					app.Write([]byte("hello"))
				}()
				server := func() net.Conn {
					up, srv := net.Pipe()
					t.Cleanup(func() { srv.Close() })
					go func() {
						if tc.serverAfter == 0 {
							io.Copy(io.Discard, srv)
							return
						}
						time.Sleep(tc.serverAfter)
						srv.Write([]byte("220 ready\r\n"))
					}()
					return up
				}
				var up net.Conn
				if tc.dialled {
					up = server()
				}
				var dials atomic.Int64
				o := awaitOpening(conn, up, start.Add(wait), func(ctx context.Context) (net.Conn, error) {
					dials.Add(1)
					switch {
					case tc.dialFails:
						return nil, errors.New("connection refused")
					case tc.dialHangs: // a destination that never answers the SYN
						<-ctx.Done()
						return nil, ctx.Err()
					}
					return server(), nil
				})
				defer o.close()
				if done := time.Since(start); done != tc.wantDone {
					t.Errorf("decided after %v, want %v", done, tc.wantDone)
				}
				if n := dials.Load(); n != int64(tc.wantDials) {
					t.Errorf("%d dials, want %d", n, tc.wantDials)
				}
				if string(o.client) != tc.wantClient || string(o.greeting) != tc.wantGreeting {
					t.Errorf("client %q, greeting %q; want %q, %q", o.client, o.greeting, tc.wantClient, tc.wantGreeting)
				}
				if o.serverFirst() != tc.wantFirst || (o.up != nil) != tc.wantUp || (o.err != nil) != tc.wantEO {
					t.Errorf("serverFirst %v, up %v, err %v; want %v, %v, error %v", o.serverFirst(), o.up != nil, o.err, tc.wantFirst, tc.wantUp, tc.wantEO)
				}
				// The deadline is cleared: the client's connection reads on.
				go app.Write([]byte("more"))
				b := make([]byte, 4)
				if _, err := io.ReadFull(conn, b); err != nil && !tc.clientCloses {
					t.Errorf("the client's connection after the wait: %v", err)
				}
			})
		})
	}
}

// bannerServer greets each connection with "220 ready", then echoes
// what it reads; accepted counts its connections.
func bannerServer(t *testing.T) (dst netip.AddrPort, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				io.WriteString(c, "220 ready\r\n")
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).AddrPort(), accepted
}

// checkServerFirst checks that a client that waits for the server's
// greeting on conn gets it, then its own bytes back, over the one
// connection the server accepted, and that p lists host passed through
// with why.
func checkServerFirst(t *testing.T, p *Proxy, conn net.Conn, accepted *atomic.Int64, host, why string) {
	t.Helper()
	conn.SetDeadline(time.Now().Add(30 * time.Second)) // a guard against a hang, not a measure
	br := bufio.NewReader(conn)
	if line, err := br.ReadString('\n'); line != "220 ready\r\n" {
		t.Fatalf("the greeting: %q, %v", line, err)
	}
	io.WriteString(conn, "EHLO x\r\n")
	if line, err := br.ReadString('\n'); line != "EHLO x\r\n" {
		t.Fatalf("the echo: %q, %v", line, err)
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("the server accepted %d connections, want the one hookpace dialled", n)
	}
	var found bool
	for _, s := range p.Tunnels() {
		found = found || s.Host == host && s.Mode == TunnelPassthrough && strings.Contains(s.Reason, why)
	}
	if !found {
		t.Errorf("tunnels %+v: want %s passed through, %q", p.Tunnels(), host, why)
	}
}

// A captured connection whose server speaks first is spliced when the
// server speaks, not when the wait for the client runs out: the app
// reads the greeting and talks on over the connection hookpace dialled.
func TestCaptureServerFirst(t *testing.T) {
	p, conn, dst, accepted := capturedToBanner(t)
	checkServerFirst(t, p, conn, accepted, dst.String(), "the server spoke first")
}

// capturedToBanner is a proxy, and a connection to its capture listener
// redirected to a bannerServer at dst, closed when the test ends.
func capturedToBanner(t *testing.T) (p *Proxy, conn net.Conn, dst netip.AddrPort, accepted *atomic.Int64) {
	t.Helper()
	p, _ = laneProxy(t, HostPolicy{}, nil, nil)
	dst, accepted = bannerServer(t)
	addr := captureListener(t, p, func(netip.AddrPort) netip.AddrPort { return dst })
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return p, conn, dst, accepted
}

// Through a CONNECT too, under connect: tunnel and to a host hookpace
// would intercept, a server that speaks first is spliced when it speaks.
func TestConnectServerFirst(t *testing.T) {
	for _, tc := range []struct {
		name string
		hp   HostPolicy
		why  string
	}{
		{"tunnel", HostPolicy{Connect: ConnectTunnel}, "connect: tunnel"},
		{"mitm", HostPolicy{Connect: ConnectMITM}, "the server spoke first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, conn, target, accepted := tunnelToBanner(t, tc.hp)
			checkServerFirst(t, p, conn, accepted, target, tc.why)
		})
	}
}

// tunnelToBanner is a proxy with a CA under hp, and a CONNECT tunnel
// through it to a bannerServer at target (localhost:port).
func tunnelToBanner(t *testing.T, hp HostPolicy) (p *Proxy, conn net.Conn, target string, accepted *atomic.Int64) {
	t.Helper()
	p, _ = laneProxy(t, hp, nil, nil)
	ca, _ := testCA(t)
	p.SetCA(ca)
	front := httptest.NewServer(p)
	t.Cleanup(front.Close)
	dst, accepted := bannerServer(t)
	target = net.JoinHostPort("localhost", strconv.Itoa(int(dst.Port())))
	return p, connectRaw(t, front.Listener.Addr().String(), target), target, accepted
}

// deadlineHeldConn lets every other goroutine run to a standstill before
// its read deadline is set to at: the scheduler may run awaitOpening's
// reader of the destination that far before the wait on the client
// begins.
type deadlineHeldConn struct {
	net.Conn
	at time.Time
}

func (c *deadlineHeldConn) SetReadDeadline(d time.Time) error {
	if d.Equal(c.at) {
		synctest.Wait()
	}
	return c.Conn.SetReadDeadline(d)
}

// A greeting read before the wait on the client begins still ends that
// wait at once: a server that spoke is never held until the deadline,
// however the reads are scheduled.
func TestAwaitOpeningGreetingBeforeClientWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const wait = 5 * time.Second
		start := time.Now()
		conn, app := net.Pipe()
		defer conn.Close()
		defer app.Close()
		up, srv := net.Pipe()
		defer srv.Close()
		go srv.Write([]byte("SSH-2.0-x\r\n")) // greets on connect
		o := awaitOpening(&deadlineHeldConn{Conn: conn, at: start.Add(wait)}, up, start.Add(wait), nil)
		defer o.close()
		if string(o.greeting) != "SSH-2.0-x\r\n" || !o.serverFirst() {
			t.Fatalf("greeting %q, serverFirst %v", o.greeting, o.serverFirst())
		}
		if done := time.Since(start); done != speculateAfter {
			t.Errorf("decided after %v, want %v: the greeting waited for the client's deadline", done, speculateAfter)
		}
	})
}

// A tunnel under connect: tunnel whose server spoke first stays open
// when a reload makes its host one hookpace would intercept: a server
// that speaks first is never served in the middle, so closing it would
// only cut the app's session.
func TestServerFirstTunnelOutlivesReload(t *testing.T) {
	p, conn, target, accepted := tunnelToBanner(t, HostPolicy{Connect: ConnectTunnel})
	checkServerFirst(t, p, conn, accepted, target, "connect: tunnel")

	pol := *p.policy.Load()
	pol.Host = func(string) HostPolicy { return HostPolicy{Connect: ConnectMITM} }
	p.SetPolicy(pol) // a reload: the host is now intercepted
	io.WriteString(conn, "QUIT\r\n")
	if line, err := bufio.NewReader(conn).ReadString('\n'); line != "QUIT\r\n" {
		t.Fatalf("the tunnel after the reload: %q, %v; want the echo", line, err)
	}
}

// A client that half-closes its connection before sending a byte (a
// banner read with nothing to say: nc < /dev/null) still gets what its
// server says, captured or through a CONNECT, as it would directly.
func TestHalfClosedClientGetsGreeting(t *testing.T) {
	check := func(t *testing.T, conn net.Conn) {
		t.Helper()
		conn.SetDeadline(time.Now().Add(30 * time.Second)) // a guard against a hang, not a measure
		if err := conn.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		if b, err := io.ReadAll(conn); string(b) != "220 ready\r\n" {
			t.Errorf("a half-closed client read %q, %v; want the server's greeting", b, err)
		}
	}
	t.Run("capture", func(t *testing.T) {
		_, conn, _, _ := capturedToBanner(t)
		check(t, conn)
	})
	t.Run("connect", func(t *testing.T) {
		p, _ := laneProxy(t, HostPolicy{Connect: ConnectTunnel}, nil, nil)
		front := httptest.NewServer(p)
		t.Cleanup(front.Close)
		dst, _ := bannerServer(t)
		check(t, connectRaw(t, front.Listener.Addr().String(), net.JoinHostPort("localhost", strconv.Itoa(int(dst.Port())))))
	})
}

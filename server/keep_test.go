package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestKeeperDecisions(t *testing.T) {
	k := newKeeper(nil, nil, 3, 10*time.Second, nil) // a window of 10 s: (sec-10, sec]
	for i, s := range []struct {
		host string
		sec  int64
		keep bool
	}{
		{"a", 100, false}, // new: kept from its second delivery on
		{"b", 100, false}, // new
		{"a", 101, true},  // a and b sent to since a's last: 2 fit in 3
		{"c", 101, false}, // new
		{"d", 101, false}, // new
		{"b", 102, false}, // b, a, c, d since b's last: 4 > 3
		{"b", 102, true},  // only b since
		{"a", 103, false}, // a, c, d, b since a's last: 4 > 3
		{"e", 111, false}, // new; 100 and 101 left the window
		{"a", 112, true},  // a (103) and e (111) since a's last
		{"c", 112, false}, // c's last (101) left the window: new again
	} {
		if got, _, unused := k.keep(s.host, s.sec); got != s.keep || unused {
			t.Fatalf("step %d (%s at %d): keep = %v (idle connections unused: %v), want %v", i, s.host, s.sec, got, unused, s.keep)
		}
	}
	// e's connection (at 111) was not kept, a's (at 112) was.
	if _, was, _ := k.keep("e", 112); was {
		t.Errorf("e's previous connection reported kept")
	}
	if _, was, _ := k.keep("a", 113); !was {
		t.Errorf("a's previous connection reported not kept")
	}
	// A clock set back counts as the newest second.
	k.keep("e", 50)
	if got := k.hosts["e"].sec; got != 113 {
		t.Fatalf("e sent to at a second set back: recorded at %d, want 113", got)
	}
}

func TestKeeperClosesIdleConnectionsBeyondUse(t *testing.T) {
	k := newKeeper(nil, nil, 3, time.Minute, nil)
	step := func(host string, keep, was, unused bool) {
		t.Helper()
		gk, gw, gu := k.keep(host, 1000)
		if gk != keep || gw != was || gu != unused {
			t.Fatalf("%s: keep, was kept, unused = %v, %v, %v; want %v, %v, %v", host, gk, gw, gu, keep, was, unused)
		}
	}
	step("a", false, false, false) // new: not kept
	step("b", false, false, false)
	step("c", false, false, false)
	step("a", true, false, false) // back, 3 in reach
	step("b", true, false, false)
	step("c", true, false, false) // the pool holds 3: full
	step("d", false, false, false)
	step("e", false, false, false)
	step("e", false, false, false) // e counts once
	step("f", false, false, false) // 3 hosts since c, the last kept: c's still fits
	step("g", false, false, true)  // 4: none of a, b, c could be kept again
	step("h", false, false, false) // closed already
	step("a", false, false, false) // its connection was closed: not waiting
	// Hosts that come back within the pool's reach start a generation
	// again; its connections are closed once it too is out of reach.
	k = newKeeper(nil, nil, 2, time.Minute, nil)
	step("a", false, false, false)
	step("b", false, false, false)
	step("a", true, false, false) // a, b since a's last: 2 fit
	step("b", true, false, false)
	step("a", true, true, false)
	step("c", false, false, false)
	step("d", false, false, false)
	// b, a, c, d since b's last: 4 > 2, and c, d, b since a, the last
	// kept: none is in reach. b's own connection is closed with a's.
	step("b", false, false, true)
	step("e", false, false, false)
}

func TestKeeperSweepsHostsOutOfTheWindow(t *testing.T) {
	k := newKeeper(nil, nil, 100, 5*time.Second, nil)
	for i := range 50 {
		k.keep(fmt.Sprintf("h%d", i), 1000)
	}
	k.keep("late", 1010)
	if len(k.hosts) != 1 || k.live != 1 {
		t.Fatalf("after the window passed: %d hosts, %d live; want 1, 1", len(k.hosts), k.live)
	}
}

// connCount serves 200s and counts the connections it accepted and those
// still open.
type connCount struct {
	srv          *httptest.Server
	opened, open atomic.Int64
}

func newConnCount(t *testing.T) *connCount {
	c := &connCount{}
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	c.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			c.opened.Add(1)
			c.open.Add(1)
		case http.StateClosed, http.StateHijacked:
			c.open.Add(-1)
		}
	}
	c.srv.Start()
	t.Cleanup(c.srv.Close)
	return c
}

// rounds posts rounds times to each of hosts (all dialled to c's
// server) through a transport keeping total idle connections, wrapped
// in a keeper or not.
func (c *connCount) rounds(t *testing.T, hosts, rounds, total int, keep bool) {
	var d net.Dialer
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, c.srv.Listener.Addr().String())
		},
		MaxIdleConns: total, MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute,
	}
	t.Cleanup(tr.CloseIdleConnections)
	var rt http.RoundTripper = tr
	if keep {
		at := time.Unix(1000, 0)
		once := tr.Clone()
		once.DisableKeepAlives = true
		rt = newKeeper(tr, once, total, time.Minute, func() time.Time { return at })
	}
	client := &http.Client{Transport: rt}
	for range rounds {
		for h := range hosts {
			resp, err := client.Post(fmt.Sprintf("http://h%d.test/hook", h), "application/json", strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
}

// waitOpen waits until c has want connections open, or fails.
func (c *connCount) waitOpen(t *testing.T, want int64) {
	deadline := time.Now().Add(30 * time.Second)
	for c.open.Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open, want %d", c.open.Load(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestKeeperReusesWhileHostsFitThePool(t *testing.T) {
	c := newConnCount(t)
	// Round 1 keeps none (every host new), round 2 keeps each host's,
	// round 3 reuses them.
	c.rounds(t, 20, 3, 24, true)
	if got := c.opened.Load(); got != 40 {
		t.Fatalf("3 rounds to 20 hosts with 24 kept: %d connections opened, want 40", got)
	}
	c.waitOpen(t, 20)
}

func TestKeeperKeepsNothingThePoolCannotUse(t *testing.T) {
	// Without keeper, 40 hosts sent to in turn through a pool of 10 open
	// a connection each delivery and keep 10 idle that are never used.
	without := newConnCount(t)
	without.rounds(t, 40, 3, 10, false)
	if got := without.opened.Load(); got != 120 {
		t.Fatalf("without keeper: %d connections opened, want 120", got)
	}
	without.waitOpen(t, 10)

	// With keeper, round 1 keeps none (every host is new), and in the
	// next rounds 40 hosts have been sent to since each host's last
	// delivery, more than the pool holds: each delivery opens a
	// connection and closes it, none is held idle.
	with := newConnCount(t)
	with.rounds(t, 40, 1, 10, true)
	with.waitOpen(t, 0)
	with.rounds(t, 40, 2, 10, true)
	if got := with.opened.Load(); got != 120 {
		t.Fatalf("with keeper: %d connections opened, want 120", got)
	}
	with.waitOpen(t, 0)
}

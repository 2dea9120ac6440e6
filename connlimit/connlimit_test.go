package connlimit

import (
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
)

// The proxy listener holds at most its cap of connections: one more client
// is accepted only when a held connection closes.
func TestLimit(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := New(raw, 2, slog.New(slog.NewTextHandler(io.Discard, nil)), "proxy")
	defer ln.Close()
	accepted := make(chan net.Conn, 3)
	var firstClosed atomic.Bool
	early := make(chan bool, 3) // per accept: was it before a slot was freed?
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			early <- !firstClosed.Load()
			accepted <- c
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", raw.Addr().String()) // the kernel's queue takes it
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, second := <-accepted, <-accepted
	if n := len(ln.slots); n != 2 {
		t.Fatalf("%d slots taken, want 2", n)
	}
	// The accept loop is blocked on a slot, not on the kernel: closing
	// one held connection lets the third in.
	firstClosed.Store(true)
	first.Close()
	first.Close() // a second Close gives nothing back twice
	third := <-accepted
	if third == nil {
		t.Fatal("listener closed")
	}
	<-early
	<-early
	if <-early {
		t.Error("the third connection was accepted while two were held")
	}
	select {
	case c := <-accepted:
		t.Fatalf("a fourth accept (%v) after one slot freed", c)
	default:
	}
	second.Close()
	third.Close()
	ln.Close()
	if _, ok := <-accepted; ok {
		t.Error("Accept returned a connection after Close")
	}
}

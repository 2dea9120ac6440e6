package server

import (
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkQuickAckRearm is what each read on the proxy listener pays
// for acknowledging at once: one setsockopt(TCP_QUICKACK) on a real
// loopback connection (docs/performance-notebook.md has the ingest bench's view).
func BenchmarkQuickAckRearm(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			defer c.Close()
			c.Read(make([]byte, 1))
		}
	}()
	c, err := quickAckListener{ln}.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	qc, ok := c.(*quickAckConn)
	if !ok {
		b.Fatalf("accepted %T, want *quickAckConn", c)
	}
	b.ReportAllocs()
	for b.Loop() {
		qc.rearm()
	}
}

// TestQuickAckOnlyWhenPending checks on a real loopback connection when a
// read re-arms TCP_QUICKACK: before a read for more while data already
// read is unanswered, and not after an answer or for the one-byte read
// that only watches the client. Each step starts with nothing left to
// acknowledge (so no delayed-ACK timer changes the mode) and the mode
// set to delay ACKs; the mode after the read says whether it re-armed.
func TestQuickAckOnlyWhenPending(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := quickAckListener{ln}.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	qc := c.(*quickAckConn)
	mode := func(set int) int {
		t.Helper()
		var v int
		var serr error
		qc.raw.Control(func(fd uintptr) {
			if set >= 0 {
				serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, set)
				return
			}
			v, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK)
		})
		if serr != nil {
			t.Fatal(serr)
		}
		return v
	}
	// step sends data, waits until the client sees it acknowledged, sets
	// the server side to delay ACKs, reads into a buffer of n bytes and
	// returns the mode after the read (1: re-armed).
	step := func(data string, n int) int {
		t.Helper()
		if _, err := client.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
		for i := 0; ; i++ {
			info, err := unix.GetsockoptTCPInfo(fd(t, client), unix.IPPROTO_TCP, unix.TCP_INFO)
			if err != nil {
				t.Fatal(err)
			}
			if info.Unacked == 0 {
				break
			}
			if i > 10000 {
				t.Fatal("the client's data was never acknowledged")
			}
			time.Sleep(time.Millisecond)
		}
		mode(0)
		if got := mode(-1); got != 0 {
			t.Fatalf("TCP_QUICKACK is %d after setting 0", got)
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(qc, buf[:len(data)]); err != nil {
			t.Fatal(err)
		}
		return mode(-1)
	}
	if got := step("POST / HTTP/1.1\r\n", 4096); got != 0 {
		t.Errorf("first read on a fresh connection re-armed (mode %d)", got)
	}
	if got := step("body", 4096); got != 1 {
		t.Errorf("read for more while the headers were unanswered did not re-arm (mode %d)", got)
	}
	if got := step("x", 1); got != 0 {
		t.Errorf("the one-byte watching read re-armed (mode %d)", got)
	}
	if _, err := qc.Write([]byte("HTTP/1.1 202 Accepted\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(client, make([]byte, 25)); err != nil {
		t.Fatal(err)
	}
	if got := step("POST / HTTP/1.1\r\n", 4096); got != 0 {
		t.Errorf("read after an answer re-armed (mode %d)", got)
	}
}

func fd(t *testing.T, c net.Conn) int {
	t.Helper()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var out int
	raw.Control(func(f uintptr) { out = int(f) })
	return out
}

package server

import (
	"net"
	"testing"
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

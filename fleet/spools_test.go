package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
)

// TestSpoolOwner has two replicas publish their spools' identities with
// their heartbeats: each tells the other's spool, live, with its admin
// address; a replica closed is still told, not live; a spool no replica
// published is unknown.
func TestSpoolOwner(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	start := func(name string, sp uint64, adminAddr string) *Limiter {
		l, err := New(Options{URL: srv.URL(), KeyPrefix: "t", Replica: name, Timeout: time.Second, LeasePeriod: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		l.Identify(sp, adminAddr)
		l.Start() // its first heartbeat publishes, before Start returns
		t.Cleanup(func() { l.Close() })
		return l
	}
	a := start("a", 0xa1, "127.0.0.1:9001")
	b := start("b", 0xb2b2b2b2b2b2b2b2, "10.0.0.2:9090")

	o, ok, err := a.SpoolOwner(ctx, 0xb2b2b2b2b2b2b2b2)
	if err != nil || !ok || o.Replica != "b" || o.Admin != "10.0.0.2:9090" || !o.Live || o.SeenAt.IsZero() {
		t.Fatalf("b's spool: %+v %v %v", o, ok, err)
	}
	if o, ok, err := b.SpoolOwner(ctx, 0xa1); err != nil || !ok || o.Replica != "a" || !o.Live {
		t.Fatalf("a's spool (a short spool id): %+v %v %v", o, ok, err)
	}
	if _, ok, err := a.SpoolOwner(ctx, 0x123); ok || err != nil {
		t.Fatalf("an unknown spool: %v %v", ok, err)
	}
	if deg, _, _ := a.State(); deg {
		t.Fatal("an unknown spool degraded the limiter")
	}
	b.Close()
	if o, ok, err := a.SpoolOwner(ctx, 0xb2b2b2b2b2b2b2b2); err != nil || !ok || o.Replica != "b" || o.Live {
		t.Fatalf("b closed: %+v %v %v; want it told, not live", o, ok, err)
	}
	if ttl := a.rdb.TTL(ctx, a.spoolsKey()).Val(); ttl <= 0 || ttl > spoolsTTL {
		t.Fatalf("the spools hash's TTL %v", ttl)
	}
}

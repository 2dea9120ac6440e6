package replicate

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The embedded server keeps the stream in its store directory: what a
// replica published is there after the server is stopped (lame duck) and
// started again on the same store.
func TestEmbeddedServerKeepsTheStreamAcrossARestart(t *testing.T) {
	store := filepath.Join(t.TempDir(), "nats")
	start := func() *Embedded {
		e, err := StartEmbedded(EmbeddedOptions{Name: "a", Listen: "127.0.0.1:0", ClusterListen: "127.0.0.1:0",
			Peers: []string{"127.0.0.1:1"}, StoreDir: store, Cluster: "hookpace", Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(e.URL(), "nats://127.0.0.1:") {
			t.Fatalf("client URL %q", e.URL())
		}
		return e
	}
	e := start()
	r := connect(t, []string{e.URL()}, "a", func(o *Options) { o.Ordered = true })
	sp := openSpool(t, t.TempDir(), r, "a")
	ctx := context.Background()
	if err := r.Start(ctx, sp); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		if err := sp.Append(ctx, msg(fmt.Sprintf("h%d.example", i%3), i), 0); err != nil {
			t.Fatal(err)
		}
	}
	want := local(t, sp)
	sp.Close()
	r.Close()
	e.Shutdown()
	if _, err := os.Stat(filepath.Join(store, "jetstream")); err != nil {
		t.Fatalf("no JetStream store in store_dir: %v", err)
	}

	e = start()
	defer e.Shutdown()
	r = connect(t, []string{e.URL()}, "a", nil)
	defer r.Close()
	equal(t, "stream after the server's restart", records(t, r, "a"), want)
	if len(want) != 12 {
		t.Fatalf("%d records, want 12", len(want))
	}
}

// A server that cannot start says why, under the setting's name, as soon
// as it fails.
func TestEmbeddedServerThatCannotStartSaysWhy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	began := time.Now()
	_, err = StartEmbedded(EmbeddedOptions{Name: "a", Listen: ln.Addr().String(), Peers: []string{"127.0.0.1:1"},
		StoreDir: t.TempDir(), Cluster: "hookpace", Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "spool.replicate.nats.embedded") {
		t.Fatalf("a client port in use: %v", err)
	}
	t.Logf("port in use: %v (after %v)", err, time.Since(began).Round(time.Millisecond))

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	_, err = StartEmbedded(EmbeddedOptions{Name: "a", Listen: "127.0.0.1:0", Peers: []string{"127.0.0.1:1"},
		StoreDir: file, Cluster: "hookpace", Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "spool.replicate.nats.embedded") {
		t.Fatalf("a store_dir that is a file: %v", err)
	}
	t.Logf("store is a file: %v (after %v)", err, time.Since(began).Round(time.Millisecond))
}

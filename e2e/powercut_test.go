package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/powercut"
)

// TestPowerCutKeepsEvery202E2E: hookpace's spool is on a file system that
// loses every write not yet synced when the power goes (internal/powercut).
// Webhooks, small (inline in Badger's log) and large (in its value log),
// are POSTed to a paused partner from many clients at once; in the middle
// of that hookpace is killed and the power cut. Restarted on what the disk
// holds and resumed, it delivers every webhook it answered 202, byte for
// byte.
func TestPowerCutKeepsEvery202E2E(t *testing.T) {
	t.Parallel()
	testPowerCut202(t, (*powercut.FS).Cut, 3)
}

// TestTornPowerCutKeepsEvery202E2E is the same with a disk that had
// written part of what it was not told to keep (powercut.FS.CutTorn), and
// small bodies only (inline in Badger's log).
func TestTornPowerCutKeepsEvery202E2E(t *testing.T) {
	t.Parallel()
	testPowerCut202(t, (*powercut.FS).CutTorn, 0)
}

// testPowerCut202 cuts the power with cut; every large-th webhook has a
// 6 KB body (0: none).
func testPowerCut202(t *testing.T, cut func(*powercut.FS) (powercut.Stats, error), large int) {
	rc := NewReceiver(t)
	backing := t.TempDir()
	f := powercut.Mount(t, backing)
	cfg := fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 2000/s, burst: 100, concurrency: 16}
`, rc.Host())
	hp := &Hookpace{t: t, Dir: t.TempDir()}
	hp.Config = filepath.Join(hp.Dir, "hookpace.yaml")
	writeConfig(t, hp.Config, "127.0.0.1:0", "127.0.0.1:0", filepath.Join(f.Dir, "spool"), cfg)
	hp.start()
	t.Cleanup(hp.Kill)
	pauseHost(t, hp, rc.Host())

	const clients, before = 16, 400 // 202s before the power goes
	body := func(i int) []byte {
		if large > 0 && i%large == 0 {
			return []byte(fmt.Sprintf(`{"event":%d,"pad":"%s"}`, i, strings.Repeat("v", 6000)))
		}
		return WebhookBody(i)
	}
	var (
		mu      sync.Mutex
		acked   = map[string][]byte{} // path -> body, answered 202
		next    atomic.Int64
		posting sync.WaitGroup
	)
	enough := make(chan struct{})
	stop := make(chan struct{})
	c := hp.Client()
	c.Timeout = 10 * time.Second
	for range clients {
		posting.Add(1)
		go func() {
			defer posting.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := int(next.Add(1))
				path := fmt.Sprintf("/pc/%d", i)
				resp, err := c.Post(rc.URL+path, "application/json", bytes.NewReader(body(i)))
				if err != nil {
					continue // hookpace is gone: not acknowledged
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					continue
				}
				mu.Lock()
				acked[path] = body(i)
				if len(acked) == before {
					close(enough)
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-enough:
	case <-time.After(30 * slack * time.Second):
		t.Fatalf("fewer than %d webhooks acknowledged\n%s", before, hp.Log())
	}
	// The power goes while the clients are still posting: hookpace first,
	// with whatever it had in flight, then what the disk was not told to
	// keep.
	hp.Kill()
	close(stop)
	posting.Wait()
	st, err := cut(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d webhooks answered 202; %d WRITE and %d FSYNC requests; the cut discarded %d blocks of %d files",
		len(acked), st.Writes, st.Syncs, st.DiscardedBlocks, st.DiscardedFiles)

	writeConfig(t, hp.Config, "127.0.0.1:0", "127.0.0.1:0", filepath.Join(backing, "spool"), cfg)
	hp.Restart()
	resumeHost(t, hp, rc.Host())
	rc.WaitFor(t, 30*time.Second, fmt.Sprintf("all %d acknowledged webhooks delivered", len(acked)), func(as []Arrival) bool {
		got := map[string]bool{}
		for _, a := range as {
			if a.Status >= 200 && a.Status < 300 && bytes.Equal(a.Body, acked[a.Path]) {
				got[a.Path] = true
			}
		}
		for path := range acked {
			if !got[path] {
				return false
			}
		}
		return true
	})
}

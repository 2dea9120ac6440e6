package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestFullDiskIs503NeverACrash: a full disk, from outside. On a
// 20 MiB tmpfs with the smallest min_free that check-config accepts,
// filling the spool behind a paused host gives 503s with a fixed reason,
// never a crash (Badger writes through memory mappings: a page the file
// system cannot give is a SIGBUS); /v1/spool says it is not accepting.
// Once the host resumes and the spool drains, space returns, ingest
// resumes by itself, and every webhook that got a 202 is delivered. No
// answer and no log line holds a webhook's headers. The test mounts the
// tmpfs, which needs root (as CI has); it fails without.
func TestFullDiskIs503NeverACrash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("this test mounts a 20 MiB tmpfs, which needs root: mount -t tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	rc := NewReceiver(t)
	cfg := "spool:\n  min_free: 13MiB\negress:\n  allow: [\"127.0.0.0/8\"]\n"
	hp := &Hookpace{t: t, Dir: dir}
	hp.Config = filepath.Join(t.TempDir(), "hookpace.yaml")
	writeConfig(t, hp.Config, "127.0.0.1:0", "127.0.0.1:0", filepath.Join(dir, "spool"), cfg)
	if out, err := exec.Command(binary, "check-config", hp.Config).CombinedOutput(); err != nil {
		t.Fatalf("check-config refuses min_free 13MiB: %v: %s", err, out)
	}
	hp.start()
	t.Cleanup(hp.Kill)
	if out, err := hp.CLI("pause", rc.Host()); err != nil {
		t.Fatalf("pause: %v: %s", err, out)
	}

	c := hp.Client()
	defer c.CloseIdleConnections()
	body := bytes.Repeat([]byte("x"), 64<<10)
	var mu sync.Mutex
	acked := map[string]bool{}
	var others []string
	n503 := 0
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range 300 {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			path := fmt.Sprintf("/full/%d", i)
			req, _ := http.NewRequest("POST", rc.URL+path, bytes.NewReader(body))
			req.Header.Set("Authorization", fmt.Sprintf("Bearer SECRET-%d", i))
			resp, err := c.Do(req)
			if err != nil {
				mu.Lock()
				others = append(others, err.Error())
				mu.Unlock()
				return
			}
			answer, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case resp.StatusCode == http.StatusAccepted:
				acked[path] = true
			case resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(answer), "spool.min_free"):
				n503++
			default:
				others = append(others, fmt.Sprintf("%d %s", resp.StatusCode, answer))
			}
			if strings.Contains(string(answer), "SECRET") {
				others = append(others, "an answer holds a header: "+string(answer))
			}
		}()
	}
	wg.Wait()
	if len(others) > 0 {
		t.Fatalf("%d answers neither 202 nor a min_free 503, first: %s\n%s", len(others), others[0], hp.Log())
	}
	select {
	case <-hp.exited:
		t.Fatalf("hookpace died filling the disk:\n%s", hp.Log())
	default:
	}
	if len(acked) < 20 || n503 < 100 {
		t.Fatalf("%d acknowledged, %d refused: want the disk filled and then 503s", len(acked), n503)
	}
	var sp struct {
		Messages  int    `json:"messages"`
		Accepting bool   `json:"accepting"`
		Refusing  string `json:"refusing"`
	}
	hp.AdminJSON("/v1/spool", &sp)
	if sp.Accepting || sp.Refusing == "" || sp.Messages != len(acked) {
		t.Fatalf("/v1/spool on a full disk: %+v, want %d queued, not accepting, and why", sp, len(acked))
	}

	if out, err := hp.CLI("resume", rc.Host()); err != nil {
		t.Fatalf("resume: %v: %s", err, out)
	}
	rc.WaitFor(t, 60*time.Second, "every acknowledged webhook delivered", func(as []Arrival) bool {
		return Delivered2xx(as) >= len(acked)
	})
	for _, a := range rc.Arrivals() {
		if !acked[a.Path] {
			t.Fatalf("delivered %s, which was not acknowledged", a.Path)
		}
	}
	Poll(t, 30*time.Second, "the spool accepting again", func() bool {
		hp.AdminJSON("/v1/spool", &sp)
		return sp.Accepting && sp.Messages == 0
	})
	PostAll(t, hp, 20, 4, func(i int) string { return fmt.Sprintf("%s/after/%d", rc.URL, i) })
	rc.WaitFor(t, 30*time.Second, "the webhooks after space returned delivered", func(as []Arrival) bool {
		return Delivered2xx(as) >= len(acked)+20
	})
	if log := hp.Log(); strings.Contains(log, "SECRET") || strings.Contains(log, "SIGBUS") || strings.Contains(log, "panic") {
		t.Fatalf("the log holds a header, a SIGBUS or a panic:\n%s", log)
	}
}

// TestLargestBodyIsStored: with the largest spool.max_body that
// check-config accepts, bodies of that size, carrying a secret header, are
// stored (202) and delivered whole, alongside small webhooks from other
// clients: no 503 to anyone, and no answer or log line holds the header.
// One byte more is 413.
func TestLargestBodyIsStored(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, "spool:\n  max_body: 30MiB\negress:\n  allow: [\"127.0.0.0/8\"]\n")
	if out, err := exec.Command(binary, "check-config", hp.Config).CombinedOutput(); err != nil {
		t.Fatalf("check-config refuses max_body 30MiB: %v: %s", err, out)
	}
	big := bytes.Repeat([]byte("b"), 30<<20)
	c := hp.Client()
	defer c.CloseIdleConnections()
	var mu sync.Mutex
	var bad []string
	var wg sync.WaitGroup
	post := func(path string, body []byte, secret string) {
		defer wg.Done()
		req, _ := http.NewRequest("POST", rc.URL+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := c.Do(req)
		if err != nil {
			mu.Lock()
			bad = append(bad, path+": "+err.Error())
			mu.Unlock()
			return
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted || strings.Contains(string(answer), "SECRET") {
			mu.Lock()
			bad = append(bad, fmt.Sprintf("%s: %d %s", path, resp.StatusCode, answer))
			mu.Unlock()
		}
	}
	for i := range 3 {
		wg.Add(1)
		go post(fmt.Sprintf("/big/%d", i), big, fmt.Sprintf("SECRET-BIG-%d", i))
	}
	for i := range 10 {
		wg.Add(1)
		go post(fmt.Sprintf("/small/%d", i), WebhookBody(i), "small-app-token")
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d webhooks not stored, first: %s", len(bad), bad[0])
	}
	if s, _ := hp.Post(c, rc.URL+"/over", append(big, 'x'), nil); s != http.StatusRequestEntityTooLarge {
		t.Fatalf("max_body + 1 byte: %d, want 413", s)
	}
	rc.WaitFor(t, 60*time.Second, "all 13 delivered", func(as []Arrival) bool { return Delivered2xx(as) >= 13 })
	for _, a := range rc.Arrivals() {
		if strings.HasPrefix(a.Path, "/big/") && !bytes.Equal(a.Body, big) {
			t.Fatalf("%s delivered with %d bytes, want the 30 MiB sent", a.Path, len(a.Body))
		}
	}
	if strings.Contains(hp.Log(), "SECRET") {
		t.Fatalf("the log holds a header:\n%s", hp.Log())
	}
}

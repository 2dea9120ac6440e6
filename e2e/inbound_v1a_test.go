package e2e

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestInboundV1a: a route that verifies Standard Webhooks with an Ed25519
// public key (whpk_) in its secret file. Ten webhooks signed now with v1a
// by the matching seed get 2xx and reach the app, once each; five whose
// signature covers another body get 401 and never do.
func TestInboundV1a(t *testing.T) {
	t.Parallel()
	const seed = "V0VCSE9PS0FTWU1NRVRSSUNURVNUUFJJVkFURUtFWTE="
	const public = "whpk_4rQZjjkCnn4m/ciYBaRPSZTA+Y/UwqgD6hgxOllF28g="
	raw, err := base64.StdEncoding.DecodeString(seed)
	if err != nil {
		t.Fatal(err)
	}
	key := ed25519.NewKeyFromSeed(raw)
	keyFile := filepath.Join(t.TempDir(), "provider.pub")
	if err := os.WriteFile(keyFile, []byte(public+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	app := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
hosts:
  %q: {rate: 1000/s, burst: 100, concurrency: 8}
inbound:
  - name: svix
    listen: 127.0.0.1:0
    to: %s
    paths: ["/webhooks/*"]
    verify: {scheme: standard-webhooks, secret_file: %s}
`, app.Host(), app.URL, keyFile))
	addr := inboundAddrs(t, hp)["svix"]
	if addr == "" {
		t.Fatalf("no inbound listening line\n%s", hp.Log())
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second}
	post := func(i int, signedBody, body string) int {
		id := fmt.Sprintf("msg_v1a_%02d", i)
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		sig := ed25519.Sign(key, []byte(id+"."+ts+"."+signedBody))
		req, err := http.NewRequest("POST", "http://"+addr+"/webhooks/svix", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Webhook-Id", id)
		req.Header.Set("Webhook-Timestamp", ts)
		req.Header.Set("Webhook-Signature", "v1a,"+base64.StdEncoding.EncodeToString(sig))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	body := func(i int) string { return fmt.Sprintf(`{"type":"invoice.paid","n":%d}`, i) }
	for i := range 10 {
		if code := post(i, body(i), body(i)); code/100 != 2 {
			t.Fatalf("webhook %d signed with v1a: %d", i, code)
		}
	}
	for i := 10; i < 15; i++ {
		if code := post(i, body(i)+" ", body(i)); code != http.StatusUnauthorized {
			t.Fatalf("webhook %d signed over another body: %d, want 401", i, code)
		}
	}
	app.WaitFor(t, 30*time.Second, "10 verified webhooks", func(as []Arrival) bool { return len(as) >= 10 })
	seen := map[string]int{}
	for _, a := range app.Arrivals() {
		seen[string(a.Body)]++
	}
	for i := range 15 {
		want := 0
		if i < 10 {
			want = 1
		}
		if seen[body(i)] != want {
			t.Errorf("webhook %d reached the app %d times, want %d", i, seen[body(i)], want)
		}
	}
	if strings.Contains(hp.Log(), seed) {
		t.Error("the log shows the seed")
	}
}

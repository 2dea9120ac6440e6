package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/overload"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

var inboundListening = regexp.MustCompile(`inbound listening.*?route=(\S+).*?listen=(\S+)|"msg":"inbound listening".*?"route":"([^"]+)".*?"listen":"([^"]+)"`)

// inboundAddrs reads each route's bound address from hookpace's
// "inbound listening" lines, logged before "hookpace started".
func inboundAddrs(t *testing.T, hp *Hookpace) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range inboundListening.FindAllStringSubmatch(hp.Log(), -1) {
		if m[1] != "" {
			out[m[1]] = m[2]
		} else {
			out[m[3]] = m[4]
		}
	}
	return out
}

// The receiving side, checked from outside: a provider posts
// 3,000 Standard Webhooks-signed webhooks with 64 connections, 20 forged
// and 100 repeats of earlier webhook-ids, to an inbound route in front of
// an app with 4 workers of 20 ms that answers 503 after 500 ms of
// waiting, paced by concurrency: auto. Every good one is 2xx at the door,
// the forged get 401, the app gets each of the 3,000 once with its body
// and webhook-id, and hookpace's own signature, and answers at most 2 %
// with 503. A Slack url_verification gets the app's own challenge
// answer, a stale timestamp 401, and a GET the app's answer.
func TestInboundBurst(t *testing.T) {
	t.Parallel()
	const whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	const ourSecret = "whsec_aG9va3BhY2UtdG8tdGhlLWFwcC1zZWNyZXQ="
	const slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	dir := t.TempDir()
	for name, s := range map[string]string{"provider": whsec, "ours": ourSecret, "slack": slackSecret} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := overload.New(4, 20*time.Millisecond, 0, 500*time.Millisecond)
	app := NewReceiver(t)
	app.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		switch r.URL.Path {
		case "/slack/events":
			var v struct{ Challenge string }
			json.Unmarshal(app.Arrivals()[n-1].Body, &v) // the receiver has read the body
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"challenge":%q,"from":"app"}`, v.Challenge)
		case "/health":
			w.Header().Set("X-App", "yes")
			io.WriteString(w, "app ok")
		default:
			p.ServeHTTP(w, r)
		}
	}
	hp := Start(t, fmt.Sprintf(`
hosts:
  %q: {rate: 1000/s, burst: 100, concurrency: auto, max_concurrency: 32, backoff_initial: 100ms}
inbound:
  - name: hooks
    listen: 127.0.0.1:0
    to: %s
    paths: ["/webhooks/*"]
    verify: {scheme: standard-webhooks, secret_file: %s}
    dedupe: {header: webhook-id}
    sign: {scheme: standard-webhooks, secret_file: %s}
  - name: slack
    listen: 127.0.0.1:0
    to: %s
    answer: {status: 200, body: ""}
    verify: {scheme: slack, secret_file: %s}
    sync: [{json: type, value: url_verification}]
`, app.Host(), app.URL, filepath.Join(dir, "provider"), filepath.Join(dir, "ours"), app.URL, filepath.Join(dir, "slack")))
	addrs := inboundAddrs(t, hp)
	if addrs["hooks"] == "" || addrs["slack"] == "" {
		t.Fatalf("no inbound listening lines for both routes: %v\n%s", addrs, hp.Log())
	}
	door := "http://" + addrs["hooks"] + "/webhooks/in"

	wh, err := standardwebhooks.NewWebhook(whsec)
	if err != nil {
		t.Fatal(err)
	}
	body := func(i int) []byte { return fmt.Appendf(nil, `{"type":"invoice.paid","n":%d,"pad":"%0200d"}`, i, i) }
	id := func(i int) string { return fmt.Sprintf("msg_%05d", i) }
	signed := func(i int, at time.Time) http.Header {
		sig, err := wh.Sign(id(i), at, body(i))
		if err != nil {
			t.Fatal(err)
		}
		return http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {id(i)},
			"Webhook-Timestamp": {strconv.FormatInt(at.Unix(), 10)}, "Webhook-Signature": {sig}}
	}

	const good, forged, repeats = 3000, 20, 100
	type job struct {
		i    int
		kind string // good, forged, repeat
	}
	jobs := make(chan job, good+forged+repeats)
	for i := range good {
		jobs <- job{i, "good"}
		if i%150 == 149 {
			jobs <- job{good + i, "forged"}
		}
		if i%30 == 29 { // a repeat of a webhook-id posted earlier
			jobs <- job{i - 10, "repeat"}
		}
	}
	close(jobs)
	var bad atomic.Int64
	var mu sync.Mutex
	var failures []string
	forged401 := 0
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, Proxy: nil}, Timeout: 30 * time.Second}
	t0 := time.Now()
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for j := range jobs {
				h := signed(j.i, time.Now())
				if j.kind == "forged" {
					h = signed(j.i, time.Now())
					h.Set("Webhook-Signature", "v1,"+"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
				}
				req, _ := http.NewRequest(http.MethodPost, door, bytes.NewReader(body(j.i)))
				req.Header = h
				resp, err := client.Do(req)
				if err != nil {
					bad.Add(1)
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s %d: %v", j.kind, j.i, err))
					mu.Unlock()
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				ok := resp.StatusCode/100 == 2
				if j.kind == "forged" {
					ok = resp.StatusCode == http.StatusUnauthorized
				}
				mu.Lock()
				if j.kind == "forged" && ok {
					forged401++
				}
				if !ok {
					failures = append(failures, fmt.Sprintf("%s %d: %d %s", j.kind, j.i, resp.StatusCode, b))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("door: %d requests answered in %v", good+forged+repeats, time.Since(t0))
	if len(failures) > 0 {
		t.Fatalf("%d wrong answers at the door, e.g. %v", len(failures), failures[:min(5, len(failures))])
	}
	if forged401 != forged {
		t.Fatalf("%d forged got 401, want %d", forged401, forged)
	}

	// Handshakes and the rest, answered by the app while the burst drains.
	slackDoor := "http://" + addrs["slack"] + "/slack/events"
	slackPost := func(payload string, ts time.Time) (int, string) {
		tss := strconv.FormatInt(ts.Unix(), 10)
		m := hmac.New(sha256.New, []byte(slackSecret))
		m.Write([]byte("v0:" + tss + ":" + payload))
		req, _ := http.NewRequest(http.MethodPost, slackDoor, bytes.NewReader([]byte(payload)))
		req.Header.Set("X-Slack-Request-Timestamp", tss)
		req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(m.Sum(nil)))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, b := slackPost(`{"token":"x","challenge":"3eZbrw1aBm2rZgRN","type":"url_verification"}`, time.Now()); st != 200 || b != `{"challenge":"3eZbrw1aBm2rZgRN","from":"app"}` {
		t.Errorf("url_verification: %d %q, want the app's own answer", st, b)
	}
	if st, b := slackPost(`{"type":"event_callback","event_id":"Ev1"}`, time.Now()); st != 200 || b != "" {
		t.Errorf("a Slack event: %d %q, want an empty 200 from the door", st, b)
	}
	if st, b := slackPost(`{"type":"event_callback","event_id":"Ev2"}`, time.Now().Add(-10*time.Minute)); st != http.StatusUnauthorized {
		t.Errorf("a stale Slack timestamp: %d %q, want 401", st, b)
	}
	stale, _ := http.NewRequest(http.MethodPost, door, bytes.NewReader(body(99999)))
	stale.Header = signed(99999, time.Now().Add(-6*time.Minute))
	if resp, err := client.Do(stale); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a stale Standard Webhooks timestamp: %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}
	if resp, err := client.Get("http://" + addrs["hooks"] + "/health"); err != nil {
		t.Errorf("GET /health: %v", err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "app ok" || resp.Header.Get("X-App") != "yes" {
			t.Errorf("GET /health: %d %q %v, want the app's answer", resp.StatusCode, b, resp.Header)
		}
	}

	// The app gets each good webhook once, unchanged, with hookpace's signature.
	isHook := func(a Arrival) bool { return a.Path == "/webhooks/in" }
	app.WaitFor(t, 90*time.Second, "3,000 webhooks delivered", func(as []Arrival) bool {
		n := 0
		for _, a := range as {
			if isHook(a) && a.Status/100 == 2 {
				n++
			}
		}
		return n >= good
	})
	took := time.Since(t0)
	ours, err := standardwebhooks.NewWebhook(ourSecret)
	if err != nil {
		t.Fatal(err)
	}
	okByID := map[string]int{}
	total, unsigned := 0, 0
	for _, a := range app.Arrivals() {
		if !isHook(a) {
			continue
		}
		total++
		if a.Status/100 != 2 {
			continue
		}
		wid := a.Header.Get("Webhook-Id")
		okByID[wid]++
		var i int
		if _, err := fmt.Sscanf(wid, "msg_%d", &i); err != nil || !bytes.Equal(a.Body, body(i)) {
			t.Fatalf("webhook %q arrived with another body: %s", wid, a.Body)
		}
		if a.Header.Get("Hookpace-Received-At") == "" {
			t.Fatalf("webhook %s without Hookpace-Received-At: %v", wid, a.Header)
		}
		if wh.Verify(a.Body, a.Header) != nil && time.Since(a.At) < 4*time.Minute {
			t.Fatalf("webhook %s: the provider's own signature no longer verifies: %v", wid, a.Header)
		}
		hdr := http.Header{"Webhook-Id": {a.Header.Get("Hookpace-Webhook-Id")}, "Webhook-Timestamp": {a.Header.Get("Hookpace-Webhook-Timestamp")},
			"Webhook-Signature": {a.Header.Get("Hookpace-Webhook-Signature")}}
		if ours.Verify(a.Body, hdr) != nil {
			unsigned++
		}
	}
	if len(okByID) != good {
		t.Errorf("the app got %d distinct webhooks, want %d", len(okByID), good)
	}
	for wid, n := range okByID {
		if n != 1 {
			t.Errorf("webhook %s reached the app %d times", wid, n)
		}
	}
	if unsigned > 0 {
		t.Errorf("%d webhooks without a valid Hookpace-Webhook-Signature", unsigned)
	}
	peak, rejected, _ := p.Stats()
	t.Logf("the app: %d webhooks in %v, %d requests, %d answered 503 (%.2f%%), at most %d at once",
		good, took, total, rejected, 100*float64(rejected)/float64(total), peak)
	if rejected*50 > total {
		t.Errorf("the app answered %d of %d with 503, want at most 2%%", rejected, total)
	}
	if m := hp.Metrics(); !regexp.MustCompile(`hookpace_inbound_rejected_total\{[^}]*reason="mismatch"[^}]*route="hooks"[^}]*\} 20\b`).MatchString(m) {
		t.Errorf("no hookpace_inbound_rejected_total of 20 mismatches for route hooks on /metrics")
	}
	if bad.Load() > 0 {
		t.Errorf("%d requests failed", bad.Load())
	}
	log := hp.Log()
	if !regexp.MustCompile(`msg=ingest .*route=hooks|"msg":"ingest".*"route":"hooks"`).MatchString(log) {
		t.Errorf("no ingest line with route=hooks")
	}
	for _, s := range []string{whsec[6:], ourSecret[6:], slackSecret} {
		if bytes.Contains([]byte(log), []byte(s)) || bytes.Contains([]byte(hp.Metrics()), []byte(s)) {
			t.Errorf("a secret appears in the log or the metrics")
		}
	}
}

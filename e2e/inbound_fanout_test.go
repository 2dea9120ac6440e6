package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/proctest"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// TestInboundFanOut: a route with several targets. Each of 20 verified
// webhooks reaches B once and C once, each copy signed by the route;
// C's copy is rewritten by C's rules, B's is not; a target whose filter
// takes nothing gets none, one whose filter takes the even ones gets
// those. B answering 503 doesn't hold C: C has all 20 while B has none,
// and B's copies alone become dead letters; replayed, each reaches B
// once, still signed. Repeats of delivered ids are taken at the door and reach no target
// again. msg show of B's copy lists its siblings; check-config prints
// the targets.
func TestInboundFanOut(t *testing.T) {
	t.Parallel()
	const whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	const ourSecret = "whsec_aG9va3BhY2UtdG8tdGhlLWFwcC1zZWNyZXQ="
	dir := t.TempDir()
	for name, s := range map[string]string{"provider": whsec, "ours": ourSecret} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var bDown atomic.Bool
	bDown.Store(true)
	b, c, d, e := NewReceiver(t), NewReceiver(t), NewReceiver(t), NewReceiver(t)
	b.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		if bDown.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}
	hp := Start(t, fmt.Sprintf(`
hosts:
  %q: {rate: 1000/s, burst: 100, concurrency: 4, backoff_initial: 50ms, backoff_max: 100ms, max_attempts: 2, breaker_cooldown: 100ms}
  %q: {rate: 1000/s, burst: 100, concurrency: 4}
  %q: {rate: 1000/s, burst: 100, concurrency: 4}
  %q: {rate: 1000/s, burst: 100, concurrency: 4}
inbound:
  - name: fan
    listen: 127.0.0.1:0
    to:
      - url: %s
        name: b
      - url: %s
        name: c
        rewrite: {json: {drop: ["$.secret"]}}
      - url: %s
        name: d
        filter: {json: type, equals: customer.deleted}
      - url: %s
        name: e
        filter: {json: n, matches: "^[0-9]*[02468]$", path: "/webhooks/*"}
    paths: ["/webhooks/*"]
    verify: {scheme: standard-webhooks, secret_file: %s}
    dedupe: {header: webhook-id}
    sign: {scheme: standard-webhooks, secret_file: %s}
`, b.Host(), c.Host(), d.Host(), e.Host(), b.URL, c.URL, d.URL, e.URL,
		filepath.Join(dir, "provider"), filepath.Join(dir, "ours")))
	addr := inboundAddrs(t, hp)["fan"]
	if addr == "" {
		t.Fatalf("no inbound listening line\n%s", hp.Log())
	}
	wh, err := standardwebhooks.NewWebhook(whsec)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := standardwebhooks.NewWebhook(ourSecret)
	if err != nil {
		t.Fatal(err)
	}
	body := func(i int) []byte { return fmt.Appendf(nil, `{"type":"invoice.paid","n":%d,"secret":"s%d"}`, i, i) }
	client := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second}
	post := func(i int) (int, http.Header) {
		now := time.Now()
		id := fmt.Sprintf("msg_fan_%02d", i)
		sig, err := wh.Sign(id, now, body(i))
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest("POST", "http://"+addr+"/webhooks/in", bytes.NewReader(body(i)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {id},
			"Webhook-Timestamp": {strconv.FormatInt(now.Unix(), 10)}, "Webhook-Signature": {sig}}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	var bIDs []string
	for i := range 20 {
		code, h := post(i)
		if code != http.StatusAccepted {
			t.Fatalf("webhook %d: %d at the door, want 202", i, code)
		}
		ids := strings.Split(h.Get("X-Hookpace-Id"), ", ")
		want := 2 // b and c
		if i%2 == 0 {
			want = 3 // and e
		}
		if len(ids) != want || h.Get("X-Hookpace-Webhook") == "" {
			t.Fatalf("webhook %d: X-Hookpace-Id %q (want %d ids), X-Hookpace-Webhook %q", i, h.Get("X-Hookpace-Id"), want, h.Get("X-Hookpace-Webhook"))
		}
		bIDs = append(bIDs, ids[0])
	}
	c.WaitFor(t, 30*time.Second, "C has the 20 while B answers 503", func(as []Arrival) bool { return Delivered2xx(as) >= 20 })
	e.WaitFor(t, 30*time.Second, "E has the 10 even ones", func(as []Arrival) bool { return Delivered2xx(as) >= 10 })
	if n := Delivered2xx(b.Arrivals()); n != 0 {
		t.Fatalf("B delivered %d while answering 503", n)
	}
	// B's copies, and B's alone, become dead letters after 2 attempts.
	var dl struct {
		Total int `json:"total"`
	}
	Poll(t, 30*time.Second, "B's 20 copies dead", func() bool {
		hp.AdminJSON("/v1/dead?host="+url.QueryEscape(b.Host()), &dl)
		return dl.Total == 20
	})
	hp.AdminJSON("/v1/dead", &dl)
	if dl.Total != 20 {
		t.Fatalf("%d dead letters in all, want B's 20", dl.Total)
	}
	// Repeats of delivered ids: taken at the door, for no target again.
	for i := range 5 {
		if code, h := post(i); code != http.StatusAccepted || h.Get("X-Hookpace-Duplicate") != "true" {
			t.Errorf("repeat of webhook %d: %d, duplicate %q; want 202 as a duplicate", i, code, h.Get("X-Hookpace-Duplicate"))
		}
	}
	out, err := hp.CLI("msg", "show", bIDs[3])
	if err != nil {
		t.Fatalf("msg show: %v\n%s", err, out)
	}
	for _, want := range []string{"target b  " + b.Host() + "  dead", "target c  " + c.Host() + "  delivered", "(this one)"} {
		if !strings.Contains(out, want) {
			t.Errorf("msg show %s lacks %q:\n%s", bIDs[3], want, out)
		}
	}
	if strings.Contains(out, "target e") {
		t.Errorf("msg show of webhook 3 (odd) lists a copy for e:\n%s", out)
	}
	page := adminPage(t, "http://"+hp.Admin+"/messages/"+bIDs[4])
	for _, want := range []string{`id="copies"`, "<td>b</td>", "<td>c</td>", "<td>e</td>", "(this one)"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page of %s lacks %q:\n%s", bIDs[4], want, page)
		}
	}
	bDown.Store(false)
	if out, err := hp.CLI("dead", "replay", "--host", b.Host()); err != nil || !strings.Contains(out, "replayed 20") {
		t.Fatalf("dead replay --host B: %v\n%s", err, out)
	}
	b.WaitFor(t, 60*time.Second, "B has the 20 once replayed", func(as []Arrival) bool { return Delivered2xx(as) >= 20 })

	count := func(rc *Receiver) map[string]int {
		got := map[string]int{}
		for _, a := range rc.Arrivals() {
			if a.Status/100 != 2 {
				continue
			}
			hdr := http.Header{"Webhook-Id": {a.Header.Get("Hookpace-Webhook-Id")}, "Webhook-Timestamp": {a.Header.Get("Hookpace-Webhook-Timestamp")},
				"Webhook-Signature": {a.Header.Get("Hookpace-Webhook-Signature")}}
			if ours.Verify(a.Body, hdr) != nil {
				t.Errorf("a copy without the route's valid signature: %s", a.Body)
			}
			if a.Header.Get("Hookpace-Inbound-Webhook") != "" || a.Header.Get("Hookpace-Inbound-Target") != "" {
				t.Errorf("hookpace's door marks reached the target: %v", a.Header)
			}
			got[string(a.Body)]++
		}
		return got
	}
	gotB, gotC, gotE := count(b), count(c), count(e)
	for i := range 20 {
		if gotB[string(body(i))] != 1 {
			t.Errorf("webhook %d reached B %d times, want 1", i, gotB[string(body(i))])
		}
		dropped := fmt.Sprintf(`{"type":"invoice.paid","n":%d}`, i)
		if gotC[dropped] != 1 {
			t.Errorf("webhook %d reached C %d times without its secret field, want 1 (C got %v)", i, gotC[dropped], gotC)
		}
		want := 0
		if i%2 == 0 {
			want = 1
		}
		if gotE[string(body(i))] != want {
			t.Errorf("webhook %d reached E %d times, want %d", i, gotE[string(body(i))], want)
		}
	}
	if len(gotB) != 20 || len(gotC) != 20 || len(gotE) != 10 {
		t.Errorf("distinct bodies: B %d, C %d, E %d; want 20, 20, 10", len(gotB), len(gotC), len(gotE))
	}
	if n := len(d.Arrivals()); n != 0 {
		t.Errorf("D, whose filter takes no webhook, got %d", n)
	}
	raw, err := proctest.Command(binary, "check-config", hp.Config).CombinedOutput()
	out = string(raw)
	if err != nil {
		t.Fatalf("check-config: %v\n%s", err, out)
	}
	for _, want := range []string{"inbound fan: listen", "4 target(s)", "b: " + b.URL, `d: ` + d.URL, `json type = "customer.deleted"`, "rewritten"} {
		if !strings.Contains(out, want) {
			t.Errorf("check-config lacks %q:\n%s", want, out)
		}
	}
}

// adminPage is the body of a 200 page at u.
func adminPage(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", u, resp.StatusCode, err, b)
	}
	return string(b)
}

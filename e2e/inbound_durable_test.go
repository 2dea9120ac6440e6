package e2e

import (
	"bytes"
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

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// inboundProvider is a provider stand-in that signs per Standard Webhooks
// and posts to an inbound route's door.
type inboundProvider struct {
	t      *testing.T
	wh     *standardwebhooks.Webhook
	client *http.Client
}

func newInboundProvider(t *testing.T, whsec string) *inboundProvider {
	wh, err := standardwebhooks.NewWebhook(whsec)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, Proxy: nil}, Timeout: 30 * time.Second}
	t.Cleanup(c.CloseIdleConnections)
	return &inboundProvider{t: t, wh: wh, client: c}
}

func inboundBody(i int) []byte {
	return fmt.Appendf(nil, `{"type":"order.created","n":%d,"pad":"%0100d"}`, i, i)
}

func inboundID(i int) string { return fmt.Sprintf("evt_%05d", i) }

// post sends webhook i, signed now, and returns the door's status (0 and
// the error when no answer came).
func (p *inboundProvider) post(door string, i int) (int, error) {
	body := inboundBody(i)
	now := time.Now()
	sig, err := p.wh.Sign(inboundID(i), now, body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequest(http.MethodPost, door, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header = http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {inboundID(i)},
		"Webhook-Timestamp": {strconv.FormatInt(now.Unix(), 10)}, "Webhook-Signature": {sig}}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// inboundDoor is the URL of route's door, read from hookpace's log.
func inboundDoor(t *testing.T, hp *Hookpace, route, path string) string {
	t.Helper()
	addr := inboundAddrs(t, hp)[route]
	if addr == "" {
		t.Fatalf("no inbound listening line for route %s\n%s", route, hp.Log())
	}
	return "http://" + addr + path
}

// kill -9 of hookpace in the middle of a provider's burst to an inbound
// route: every webhook the door acknowledged with 2xx reaches the app
// after the restart, by its provider delivery id, with its own body. The
// provider then retries what got no 2xx (as providers do); each of those
// is acknowledged and delivered too, and the dedupe keeps a retried one
// that had been stored before the kill from reaching the app twice.
func TestInboundKill9MidBurst(t *testing.T) {
	t.Parallel()
	const whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	dir := t.TempDir()
	secret := filepath.Join(dir, "provider")
	if err := os.WriteFile(secret, []byte(whsec+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	app := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
hosts:
  %q: {rate: 100/s, burst: 20, concurrency: 4}
inbound:
  - name: hooks
    listen: 127.0.0.1:0
    to: %s
    paths: ["/webhooks/*"]
    verify: {scheme: standard-webhooks, secret_file: %s}
    dedupe: {header: webhook-id}
`, app.Host(), app.URL, secret))
	door := inboundDoor(t, hp, "hooks", "/webhooks/orders")
	prov := newInboundProvider(t, whsec)

	const n, killAt = 1500, 600
	var (
		mu          sync.Mutex
		acked       = map[int]bool{}
		refused     []string // answered, but not 2xx, before the kill
		killed      atomic.Bool
		killedAfter int
		wg          sync.WaitGroup
	)
	jobs := make(chan int, n)
	for i := range n {
		jobs <- i
	}
	close(jobs)
	start := time.Now()
	for range 32 {
		wg.Go(func() {
			for i := range jobs {
				if killed.Load() {
					continue // not sent: the provider retries it below
				}
				st, err := prov.post(door, i)
				mu.Lock()
				switch {
				case err == nil && st/100 == 2:
					acked[i] = true
				case err == nil && !killed.Load():
					refused = append(refused, fmt.Sprintf("%d: %d", i, st))
				}
				kill := len(acked) >= killAt && !killed.Load()
				if kill {
					killed.Store(true)
				}
				mu.Unlock()
				if kill {
					hp.Kill()
					mu.Lock()
					killedAfter = len(acked)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(refused) > 0 {
		t.Fatalf("%d webhooks refused at the door before the kill, e.g. %v", len(refused), refused[:min(3, len(refused))])
	}
	before := Delivered2xx(app.Arrivals())
	t.Logf("kill -9 after %d acknowledgements (%d in all, counting those answered while it died), %v after the first post; the app had %d",
		killedAfter, len(acked), time.Since(start).Round(time.Millisecond), before)
	if !killed.Load() || len(acked) >= n {
		t.Fatalf("hookpace was not killed mid-burst (%d of %d acknowledged)", len(acked), n)
	}
	if before >= len(acked)/2 {
		t.Fatalf("%d of %d acknowledged already delivered at the kill: the test proves nothing", before, len(acked))
	}

	hp.Restart()
	// Every acknowledged webhook, without the provider doing anything.
	got := func(as []Arrival) map[int]int {
		out := map[int]int{}
		for _, a := range as {
			if a.Status/100 != 2 {
				continue
			}
			var i int
			if _, err := fmt.Sscanf(a.Header.Get("Webhook-Id"), "evt_%d", &i); err != nil || !bytes.Equal(a.Body, inboundBody(i)) {
				t.Fatalf("the app got %q with a body not the provider's: %q", a.Header.Get("Webhook-Id"), a.Body)
			}
			out[i]++
		}
		return out
	}
	app.WaitFor(t, 30*time.Second, "every acknowledged webhook delivered after kill -9", func(as []Arrival) bool {
		g := got(as)
		for i := range acked {
			if g[i] == 0 {
				return false
			}
		}
		return true
	})
	t.Logf("all %d acknowledged delivered %v after the first post", len(acked), time.Since(start).Round(time.Millisecond))

	// The provider retries what it got no 2xx for, at the restarted door.
	door = inboundDoor(t, hp, "hooks", "/webhooks/orders")
	var retried []int
	for i := range n {
		if !acked[i] {
			retried = append(retried, i)
		}
	}
	retry := make(chan int, len(retried))
	for _, i := range retried {
		retry <- i
	}
	close(retry)
	var failed atomic.Int64
	for range 16 {
		wg.Go(func() {
			for i := range retry {
				if st, err := prov.post(door, i); err != nil || st/100 != 2 {
					failed.Add(1)
					t.Errorf("retry of %s after the restart: %d %v", inboundID(i), st, err)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.FailNow()
	}
	app.WaitFor(t, 30*time.Second, "every webhook delivered", func(as []Arrival) bool { return len(got(as)) == n })
	g := got(app.Arrivals())
	dups := 0
	for i := range n {
		dups += g[i] - 1
	}
	t.Logf("all %d delivered (%d retried by the provider) %v after the first post; %d delivered twice",
		n, len(retried), time.Since(start).Round(time.Millisecond), dups)
	// One kill repeats at most the host's requests sent and not deleted
	// durably, in flight or answered with the delete pending, which its
	// settle cap holds at 2 × concurrency.
	if dups > 2*4 {
		t.Errorf("%d webhooks delivered twice after one kill -9 with concurrency 4, want at most 8", dups)
	}
}

// The app answers 429 with Retry-After: its host is held, so the app gets
// nothing until the hold ends, while a route to another app carries on;
// then everything is delivered, each once.
func TestInboundAppRetryAfterHold(t *testing.T) {
	t.Parallel()
	const hold = 4 * time.Second
	var (
		mu   sync.Mutex
		t429 time.Time
	)
	held := NewReceiver(t)
	held.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			mu.Lock()
			t429 = time.Now()
			mu.Unlock()
			w.Header().Set("Retry-After", strconv.Itoa(int(hold/time.Second)))
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	other := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
hosts:
  %q: {rate: 100/s, burst: 10, concurrency: 2, backoff_initial: 50ms}
  %q: {rate: 100/s, burst: 10, concurrency: 2}
inbound:
  - name: held
    listen: 127.0.0.1:0
    to: %s
    dedupe: {header: webhook-id}
  - name: other
    listen: 127.0.0.1:0
    to: %s
    dedupe: {header: webhook-id}
`, held.Host(), other.Host(), held.URL, other.URL))
	prov := newInboundProvider(t, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	heldDoor := inboundDoor(t, hp, "held", "/hooks/held")
	otherDoor := inboundDoor(t, hp, "other", "/hooks/other")
	post := func(door string, from, to int) {
		for i := from; i < to; i++ {
			if st, err := prov.post(door, i); err != nil || st/100 != 2 {
				t.Fatalf("POST %s webhook %d: %d %v, want 2xx", door, i, st, err)
			}
		}
	}

	post(heldDoor, 0, 1)
	held.WaitFor(t, 10*time.Second, "the app's 429", func(as []Arrival) bool {
		return len(as) == 1 && as[0].Status == http.StatusTooManyRequests
	})
	mu.Lock()
	holdEnd := t429.Add(hold)
	mu.Unlock()
	// The hold starts once the 429 reaches hookpace: a webhook posted
	// before that may go out on the host's second slot, as it would
	// before any answer.
	Poll(t, 10*time.Second, "the held app's host held", func() bool { return failHost(t, hp, held.Host()).HeldUntil != nil })
	post(heldDoor, 1, 21)
	post(otherDoor, 100, 120)
	other.WaitFor(t, 10*time.Second, "20 webhooks at the other app", func(as []Arrival) bool { return Delivered2xx(as) == 20 })
	otherDone := time.Now()
	heldDuring := held.Count(nil) - 1
	t.Logf("the other app got its 20 %v into the %v hold; the held app meanwhile got %d",
		otherDone.Sub(t429).Round(time.Millisecond), hold, heldDuring)
	if otherDone.After(holdEnd) {
		t.Errorf("the other app's 20 webhooks took until %v after the hold ended: it did not carry on", otherDone.Sub(holdEnd))
	}

	held.WaitFor(t, 20*time.Second, "21 webhooks at the held app", func(as []Arrival) bool { return Delivered2xx(as) == 21 })
	seen := map[string]int{}
	for k, a := range held.Arrivals() {
		if k == 0 {
			continue
		}
		// hookpace starts the hold when the 429 reaches it, after t429.
		if a.At.Before(holdEnd) {
			t.Errorf("the held app got %s %v before the hold ended", a.Header.Get("Webhook-Id"), holdEnd.Sub(a.At))
		}
		if a.Status/100 == 2 {
			seen[a.Header.Get("Webhook-Id")]++
		}
	}
	for i := range 21 {
		if seen[inboundID(i)] != 1 {
			t.Errorf("%s reached the held app %d times with 2xx, want once", inboundID(i), seen[inboundID(i)])
		}
	}
	t.Logf("the held app's first request after the 429 came %v after it (Retry-After: %v)",
		held.Arrivals()[1].At.Sub(t429).Round(time.Millisecond), hold)
	h := regexp.QuoteMeta(held.Host())
	if !regexp.MustCompile(`msg=delivery host=` + h + ` .*hold=429|"msg":"delivery","host":"` + h + `".*"hold":"429"`).MatchString(hp.Log()) {
		t.Errorf("no delivery line with hold=429 for the app in hookpace's log")
	}
}

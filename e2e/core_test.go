package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// 2,000 webhooks to a host at 200/s burst 20 all get
// 202, all arrive exactly once and byte-identical, and no 1-second window at
// the receiver holds more than 220.
func TestPacedExactlyOnce(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 200/s, burst: 20, concurrency: 4}
`, rc.Host()))
	c := hp.Client()
	const n = 2000
	var wg sync.WaitGroup
	var accepted atomic.Int64
	sem := make(chan struct{}, 32)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			body := bytes.Repeat([]byte(fmt.Sprintf("%06d|", i)), 20)
			status, _ := hp.Post(c, fmt.Sprintf("%s/hook/%d?x=%d", rc.URL, i, i), body,
				http.Header{"Content-Type": {"application/json"}, "X-Event": {fmt.Sprint(i)}})
			if status == http.StatusAccepted {
				accepted.Add(1)
			} else {
				t.Errorf("webhook %d: status %d", i, status)
			}
		}()
	}
	wg.Wait()
	if accepted.Load() != n {
		t.Fatalf("%d of %d accepted", accepted.Load(), n)
	}
	rc.WaitFor(t, 60*time.Second, "2000 deliveries", func(as []Arrival) bool { return len(as) >= n })

	got := rc.Arrivals()
	if len(got) != n {
		t.Fatalf("%d arrivals, want exactly %d", len(got), n)
	}
	seen := map[string]bool{}
	for _, a := range got {
		if seen[a.Path] {
			t.Fatalf("%s arrived twice", a.Path)
		}
		seen[a.Path] = true
		var i int
		fmt.Sscanf(a.Header.Get("X-Event"), "%d", &i)
		want := bytes.Repeat([]byte(fmt.Sprintf("%06d|", i)), 20)
		if a.Path != fmt.Sprintf("/hook/%d?x=%d", i, i) || !bytes.Equal(a.Body, want) ||
			a.Header.Get("Content-Type") != "application/json" || a.Method != "POST" {
			t.Fatalf("webhook %d altered: %s %s %q", i, a.Method, a.Path, a.Body)
		}
		if a.Header.Get("Proxy-Connection") != "" || a.Header.Get("Proxy-Authorization") != "" {
			t.Fatalf("proxy headers forwarded: %v", a.Header)
		}
	}
	times := make([]time.Time, len(got))
	for i, a := range got {
		times[i] = a.At
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	if m := maxWindow(times, time.Second); m > 220 {
		t.Fatalf("%d arrivals in one second, want at most 20 + 200", m)
	}
	t.Logf("2000 webhooks: busiest second %d, first to last %v", maxWindow(times, time.Second), times[len(times)-1].Sub(times[0]))
}

func maxWindow(ts []time.Time, w time.Duration) int {
	best, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

// coreTally tallies complete 2xx deliveries of webhooks sent to PREFIX/i with
// WebhookBody(i). Arrivals are append-only, so update only looks at the new
// ones and can run on every wake of WaitFor. A request cut short by a
// kill -9 (partial body) does not count.
type coreTally struct {
	prefix  string
	seen    int   // arrivals already looked at
	count   []int // complete deliveries per webhook
	unique  int   // webhooks delivered at least once
	total   int   // complete deliveries, duplicates included
	partial int   // arrivals for our paths with a truncated body
}

func newCoreTally(prefix string, n int) *coreTally {
	return &coreTally{prefix: prefix, count: make([]int, n)}
}

func (l *coreTally) update(as []Arrival) {
	for _, a := range as[l.seen:] {
		if a.Status == 0 {
			return // not answered yet: looked at again next time
		}
		l.seen++
		var i int
		if _, err := fmt.Sscanf(a.Path, l.prefix+"%d", &i); err != nil || i < 0 || i >= len(l.count) ||
			a.Path != fmt.Sprintf("%s%d", l.prefix, i) {
			continue
		}
		if !bytes.Equal(a.Body, WebhookBody(i)) {
			l.partial++
			continue
		}
		if a.Status < 200 || a.Status > 299 {
			continue
		}
		if l.count[i] == 0 {
			l.unique++
		}
		l.count[i]++
		l.total++
	}
}

func (l *coreTally) all() bool { return l.unique == len(l.count) }

// Kill -9 right after 1,500 webhooks were acknowledged,
// with most still queued, loses none of them.
func TestKill9Durability(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 100/s, burst: 20, concurrency: 4}
`, rc.Host()))
	const n = 1500
	start := time.Now()
	PostAll(t, hp, n, 32, func(i int) string { return fmt.Sprintf("%s/k/%d", rc.URL, i) })
	hp.Kill()
	before := rc.Count(nil)
	t.Logf("%d webhooks acknowledged in %v; %d had arrived when hookpace was killed",
		n, time.Since(start).Round(time.Millisecond), before)
	if before >= n/2 {
		t.Fatalf("%d of %d already delivered before the kill: the test proves nothing", before, n)
	}

	hp.Restart()
	l := newCoreTally("/k/", n)
	rc.WaitFor(t, 60*time.Second, "every acknowledged webhook delivered after kill -9",
		func(as []Arrival) bool { l.update(as); return l.all() })
	dups := l.total - n
	t.Logf("all %d delivered after restart, %v in all; %d duplicates, %d truncated requests",
		n, time.Since(start).Round(time.Millisecond), dups, l.partial)
	// One kill repeats at most the host's requests sent and not deleted
	// durably, in flight or answered with the delete pending, which its
	// settle cap holds at 2 × concurrency.
	if dups > 2*4 {
		t.Errorf("%d duplicates after one kill -9 with concurrency 4, want at most 8", dups)
	}
}

// A slow host's backlog does not slow a fast host.
func TestHostIsolation(t *testing.T) {
	t.Parallel()
	slow, fast := NewReceiver(t), NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 1/s, burst: 1, concurrency: 1}
  "%s": {rate: 1000/s, burst: 100, concurrency: 16}
`, slow.Host(), fast.Host()))
	begin := time.Now()
	PostAll(t, hp, 200, 32, func(i int) string { return fmt.Sprintf("%s/slow/%d", slow.URL, i) })

	const n = 2000
	start := time.Now()
	PostAll(t, hp, n, 32, func(i int) string { return fmt.Sprintf("%s/fast/%d", fast.URL, i) })
	acked := time.Since(start)
	l := newCoreTally("/fast/", n)
	fast.WaitFor(t, 20*time.Second, "2000 webhooks at the fast host",
		func(as []Arrival) bool { l.update(as); return l.all() })
	took := time.Since(start)
	slowGot := slow.Count(nil)
	t.Logf("fast host: %d webhooks acknowledged in %v, all delivered %v after the first was sent (acceptance: 6 s); "+
		"slow host meanwhile got %d of its 200", n, acked.Round(time.Millisecond), took.Round(time.Millisecond), slowGot)
	if l.total != n {
		t.Errorf("fast host got %d deliveries for %d webhooks", l.total, n)
	}
	// The slow host stays paced at 1/s: one token to start with, one per
	// second since, and one for rounding.
	if limit := 2 + int(time.Since(begin).Seconds()); slow.Count(nil) > limit {
		t.Errorf("slow host (1/s) got %d requests in %v", slow.Count(nil), time.Since(begin))
	}
}

// Check-config names a typo'd field and its line, and
// exits 1; the shipped example is valid.
func TestCheckConfig(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("listen: 127.0.0.1:8080\ndefaults:\n  burst: 5\n  ratee: 10/s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary, "check-config", bad).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("check-config on a typo: %v, want exit status 1\n%s", err, out)
	}
	if !strings.Contains(string(out), "ratee") || !regexp.MustCompile(`\b4\b`).Match(out) {
		t.Errorf("check-config output names neither the field ratee nor line 4:\n%s", out)
	}
	t.Logf("typo: %s", bytes.TrimSpace(out))

	out, err = exec.Command(binary, "check-config", "../config.example.yaml").CombinedOutput()
	if err != nil {
		t.Errorf("check-config config.example.yaml: %v\n%s", err, out)
	}
	// The same flag as run takes works too.
	out, err = exec.Command(binary, "check-config", "--config", bad).CombinedOutput()
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "ratee") {
		t.Errorf("check-config --config on a typo: %v, want exit status 1 naming ratee\n%s", err, out)
	}
}

// Curl, a real client that is not Go, can use hookpace
// as its proxy; the webhook arrives byte-identical.
func TestCurlClient(t *testing.T) {
	t.Parallel()
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is not on PATH: this test needs a real non-Go client (.ci/run installs curl)")
	}
	rc := NewReceiver(t)
	hp := Start(t, `egress: {allow: ["127.0.0.0/8"]}`)
	// curl -d @file strips CR and LF, so the body has none; it has
	// everything else that a careless proxy might mangle.
	body := []byte(`{"text":"héllo wörld ✓","quote":"\"","amp":"a&b=c+d%20e","tab":"	","n":` +
		strings.Repeat("1234567890", 40) + `}`)
	file := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(file, body, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(curl, "-s", "-x", "http://"+hp.Proxy, "-d", "@"+file,
		"-w", "\n%{http_code}", rc.URL+"/hook")
	cmd.Env = append(os.Environ(), "NO_PROXY=", "no_proxy=", "ALL_PROXY=", "all_proxy=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("curl: %v\n%s", err, out)
	}
	cut := bytes.LastIndexByte(out, '\n')
	answer, code := out[:max(cut, 0)], out[cut+1:]
	if string(code) != "202" {
		t.Fatalf("curl got %s, want 202:\n%s", code, out)
	}
	var ack struct{ ID string }
	if err := json.Unmarshal(answer, &ack); err != nil || ack.ID == "" {
		t.Fatalf("curl got %q, want JSON with an id (%v)", answer, err)
	}
	rc.WaitFor(t, 10*time.Second, "the curl webhook", func(as []Arrival) bool { return len(as) >= 1 })
	a := rc.Arrivals()[0]
	if a.Method != "POST" || a.Path != "/hook" || !bytes.Equal(a.Body, body) {
		t.Fatalf("arrived %s %s %q, want POST /hook %q", a.Method, a.Path, a.Body, body)
	}
	t.Logf("curl: 202 %s; %d bytes arrived identical", bytes.TrimSpace(answer), len(a.Body))
}

// Non-POST requests pass through synchronously with the
// receiver's answer; origin-form requests to the proxy get 400.
func TestGetPassthrough(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	rc.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("X-Partner", "yes")
		w.WriteHeader(http.StatusTeapot)
		fmt.Fprintf(w, "answer to %s %s", r.Method, r.URL.RequestURI())
	}
	hp := Start(t, `egress: {allow: ["127.0.0.0/8"]}`)
	resp, err := hp.Client().Get(rc.URL + "/status?x=1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// Synchronous: the receiver has the request by the time the client has
	// the answer, which is the receiver's own.
	if n := rc.Count(nil); n != 1 {
		t.Errorf("receiver got %d requests when the GET returned, want 1", n)
	}
	if resp.StatusCode != http.StatusTeapot || string(b) != "answer to GET /status?x=1" || resp.Header.Get("X-Partner") != "yes" {
		t.Errorf("GET through hookpace: %d %q (X-Partner %q), want the receiver's 418", resp.StatusCode, b, resp.Header.Get("X-Partner"))
	}
	if resp.Header.Get("X-Hookpace-Id") != "" {
		t.Errorf("a GET was spooled: id %s", resp.Header.Get("X-Hookpace-Id"))
	}

	// A destination that can't be reached, or that egress policy refuses,
	// gets a clear answer, not a bare 500.
	for _, tc := range []struct {
		url    string
		status int
		reason string
	}{
		{"http://nowhere.invalid/x", http.StatusServiceUnavailable, "cannot reach nowhere.invalid"},
		{"http://10.1.2.3/x", http.StatusForbidden, "refused: private"},
	} {
		resp, err := hp.Client().Get(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.reason) {
			t.Errorf("GET %s: %d %q, want %d naming %q", tc.url, resp.StatusCode, b, tc.status, tc.reason)
		}
	}

	// Straight to the proxy port, no proxy: origin-form.
	resp, err = (&http.Client{Transport: &http.Transport{Proxy: nil}}).Get("http://" + hp.Proxy + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("origin-form GET: %d %q, want 400", resp.StatusCode, b)
	}
}

// A body over spool.max_body gets 413 and is not
// delivered, whether its length is declared or streamed.
func TestBodyLimit(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, `
spool:
  max_body: 1KiB
egress: {allow: ["127.0.0.0/8"]}
`)
	c := hp.Client()
	post := func(path string, body []byte, chunked bool) int {
		t.Helper()
		var r io.Reader = bytes.NewReader(body)
		if chunked {
			r = io.MultiReader(r) // hides the length: sent chunked
		}
		resp, err := c.Post(rc.URL+path, "application/octet-stream", r)
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	big := bytes.Repeat([]byte("b"), 2048)
	if s := post("/big", big, false); s != http.StatusRequestEntityTooLarge {
		t.Errorf("2 KiB POST with Content-Length: %d, want 413", s)
	}
	if s := post("/big-chunked", big, true); s != http.StatusRequestEntityTooLarge {
		t.Errorf("2 KiB chunked POST: %d, want 413", s)
	}
	edge := bytes.Repeat([]byte("e"), 1024)
	if s := post("/edge", edge, false); s != http.StatusAccepted {
		t.Errorf("POST of exactly max_body: %d, want 202", s)
	}
	small := bytes.Repeat([]byte("s"), 512)
	if s := post("/small-chunked", small, true); s != http.StatusAccepted {
		t.Errorf("512-byte chunked POST: %d, want 202", s)
	}
	// The accepted webhooks are delivered intact; the rejected ones, sent
	// before them to the same host, never were.
	want := map[string][]byte{"/edge": edge, "/small-chunked": small}
	rc.WaitFor(t, 10*time.Second, "the accepted webhooks", func(as []Arrival) bool { return len(as) >= len(want) })
	for _, a := range rc.Arrivals() {
		if body, ok := want[a.Path]; !ok || !bytes.Equal(a.Body, body) {
			t.Errorf("delivered %s (%d bytes), want only /edge and /small-chunked, intact", a.Path, len(a.Body))
		}
		delete(want, a.Path)
	}
}

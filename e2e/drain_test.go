package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// logInt reads key=N from the first log line with msg (text format).
func logInt(t *testing.T, log, msg, key string) int {
	t.Helper()
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, `msg="`+msg+`"`) && !strings.Contains(l, "msg="+msg+" ") {
			continue
		}
		m := regexp.MustCompile(`\b` + regexp.QuoteMeta(key) + `=(\d+)`).FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("log line %q has no %s=\n%s", msg, key, log)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	t.Fatalf("no %q line in the log\n%s", msg, log)
	return 0
}

// rewrite replaces hp's config (listeners and spool dir as Start set
// them) before a Restart.
func rewrite(t *testing.T, hp *Hookpace, cfg string) {
	t.Helper()
	writeConfig(t, hp.Config, "127.0.0.1:0", "127.0.0.1:0", filepath.Join(hp.Dir, "spool"), cfg)
}

// stoppingAnswers waits until hp says it is stopping (/readyz 503), then
// checks that a new webhook gets 503 with a Retry-After and is not stored.
func stoppingAnswers(t *testing.T, hp *Hookpace, target string) {
	t.Helper()
	Poll(t, 5*time.Second, "/readyz failing after SIGTERM", func() bool {
		resp, err := http.Get("http://" + hp.Admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	req, _ := http.NewRequest("POST", target, strings.NewReader(`{"late":true}`))
	resp, err := hp.Client().Do(req)
	if err != nil {
		t.Fatalf("POST while stopping: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || resp.Header.Get("X-Hookpace-Id") != "" {
		t.Errorf("POST while stopping: %d, Retry-After %q, id %q; want 503 with a Retry-After and no id",
			resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("X-Hookpace-Id"))
	}
}

// checkOnce checks that webhooks PREFIX/0..n-1 (WebhookBody(i)) each
// arrived exactly once, byte-identical, with their X-Event header.
func checkOnce(t *testing.T, as []Arrival, n int) {
	t.Helper()
	seen := map[string]int{}
	for _, a := range as {
		seen[a.Path]++
		var i int
		if _, err := fmt.Sscanf(a.Path, "/h/%d", &i); err != nil {
			t.Errorf("unexpected arrival %s", a.Path)
			continue
		}
		if !bytes.Equal(a.Body, WebhookBody(i)) || a.Method != "POST" || a.Header.Get("Content-Type") != "application/json" {
			t.Errorf("webhook %d altered: %s %q %v", i, a.Method, a.Body, a.Header)
		}
		if a.Header.Get("X-Hookpace-Handoff-From") != "" || a.Header.Get("Proxy-Authorization") != "" {
			t.Errorf("webhook %d carries hookpace's own headers: %v", i, a.Header)
		}
	}
	for i := range n {
		if k := seen[fmt.Sprintf("/h/%d", i)]; k != 1 {
			t.Errorf("webhook %d arrived %d times", i, k)
		}
	}
}

// 120 webhooks queued for a 2/s partner, SIGTERM with a 3 s
// drain and no hand-off: hookpace goes on delivering for the drain,
// refuses new webhooks, exits 1 saying how many are left, and a restart
// on the same spool delivers them all.
func TestDrainThenRestart(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	partner := fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: %%s, burst: 1, concurrency: 2}
shutdown: {timeout: 10s, drain: 3s}
`, rc.Host())
	hp := Start(t, fmt.Sprintf(partner, "2/s"))
	const n = 120
	PostAll(t, hp, n, 16, func(i int) string { return fmt.Sprintf("%s/h/%d", rc.URL, i) })
	rc.WaitFor(t, 10*time.Second, "first delivery", func(as []Arrival) bool { return Delivered2xx(as) >= 1 })

	hp.Signal(syscall.SIGTERM)
	stoppingAnswers(t, hp, rc.URL+"/late")
	if code := hp.Wait(30 * time.Second); code != 1 {
		t.Fatalf("exit code %d with webhooks left, want 1\n%s", code, hp.Log())
	}
	log := hp.Log()
	during, left := logInt(t, log, "drain ended", "delivered"), logInt(t, log, "hookpace stopped", "queued")
	// Paced as usual: at most burst + rate x drain (1 + 2 x 3), and it went on.
	if during < 1 || during > 7+1 {
		t.Errorf("%d delivered during the 3 s drain at 2/s, want about 6", during)
	}
	if got := len(rc.Arrivals()); got+left != n {
		t.Errorf("%d arrived and %d left, want %d in all", got, left, n)
	}
	if !strings.Contains(log, fmt.Sprintf("%d webhooks still queued", left)) {
		t.Errorf("the exit does not say how many are left\n%s", log)
	}
	t.Logf("delivered during the drain: %d; left: %d of %d", during, left, n)

	rewrite(t, hp, fmt.Sprintf(partner, "500/s"))
	hp.Restart()
	// Logged after the started line, which Restart returns on.
	Poll(t, 10*time.Second, "the resume line", func() bool { return strings.Contains(hp.Log(), "resuming the spool of a previous run") })
	if got := logInt(t, hp.Log(), "resuming the spool of a previous run", "webhooks"); got != left {
		t.Errorf("restart says it resumes %d webhooks, want %d", got, left)
	}
	rc.WaitFor(t, 30*time.Second, "all delivered after the restart", func(as []Arrival) bool { return len(as) >= n })
	checkOnce(t, rc.Arrivals(), n)
}

// The same with a hand-off to a second hookpace. A
// exits 0 within its budget, every webhook reaches the partner once and
// byte-identical, those handed off paced by B's own limits.
func TestHandoffToSecondHookpace(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	secret := handoffSecret(t) // both ends: B keeps A's ids
	b := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
auth: {users: [{username: a, password: s3cret}]}
hosts:
  "%s": {rate: 20/s, burst: 1, concurrency: 2}
shutdown: {handoff_secret_file: %s}
`, rc.Host(), secret))
	a := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 2/s, burst: 1, concurrency: 2}
shutdown: {timeout: 10s, drain: 3s, handoff: "http://a:s3cret@%s", handoff_secret_file: %s}
`, rc.Host(), b.Proxy, secret))
	const n = 120
	PostAll(t, a, n, 16, func(i int) string { return fmt.Sprintf("%s/h/%d", rc.URL, i) })
	rc.WaitFor(t, 10*time.Second, "first delivery", func(as []Arrival) bool { return Delivered2xx(as) >= 1 })

	a.Signal(syscall.SIGTERM)
	stoppingAnswers(t, a, rc.URL+"/late")
	if code := a.Wait(20 * time.Second); code != 0 {
		t.Fatalf("A's exit code %d, want 0\n%s", code, a.Log())
	}
	log := a.Log()
	handed := logInt(t, log, "handoff ended", "handed_off")
	if left := logInt(t, log, "handoff ended", "left"); left != 0 {
		t.Fatalf("%d left after the hand-off\n%s", left, log)
	}
	if took := logInt(t, log, "hookpace stopped", "took_ms"); took > 10_000 {
		t.Errorf("A took %d ms to stop, past its 10 s shutdown.timeout", took)
	}
	t.Logf("A: %d delivered during the drain, %d handed off at %d/s", logInt(t, log, "drain ended", "delivered"),
		handed, logInt(t, log, "handoff ended", "per_second"))

	rc.WaitFor(t, 60*time.Second, "all 120 delivered", func(as []Arrival) bool { return len(as) >= n })
	// B's ingest lines name the id each webhook had at A.
	if got := strings.Count(b.Log(), "handoff_from="); got != handed {
		t.Errorf("B logged %d ingests with handoff_from, A handed off %d\n%s", got, handed, b.Log())
	}
	got := rc.Arrivals()
	checkOnce(t, got, n)
	// A handed-off webhook keeps the id its app got from A (receivers
	// de-duplicate on it): B's ingest line gives it the id it had, and
	// every delivery, A's or B's, carries one of A's ids, each once.
	for _, line := range strings.Split(b.Log(), "\n") {
		if _, from, ok := strings.Cut(line, "handoff_from="); ok {
			from, _, _ = strings.Cut(from, " ")
			if _, id, _ := strings.Cut(from, "/"); !strings.Contains(line, " id="+id) {
				t.Errorf("B gave a handed-off webhook another id: %s", line)
			}
		}
	}
	_, first, _ := strings.Cut(a.Log(), "msg=ingest ")
	_, aid, _ := strings.Cut(first, " id=")
	ids := map[string]bool{}
	for _, x := range got {
		id := x.Header.Get("X-Hookpace-Id")
		if len(id) != 32 || len(aid) < 16 || id[:16] != aid[:16] || ids[id] {
			t.Errorf("a delivery with X-Hookpace-Id %q: want one of A's (%.16s...), each once", id, aid)
		}
		ids[id] = true
	}
	// B's deliveries come after A's (A stops delivering before it hands
	// off): the last `handed` arrivals, paced by B's 20/s, burst 1.
	sort.Slice(got, func(i, j int) bool { return got[i].At.Before(got[j].At) })
	times := make([]time.Time, 0, handed)
	for _, x := range got[len(got)-handed:] {
		times = append(times, x.At)
	}
	// A token bucket of burst 1 at 20/s cannot send them faster than
	// (handed-1)/20 s, whatever the scheduling: a load that delays some
	// deliveries only makes this longer. (A window count would not do: on
	// a loaded machine one late delivery bunches with the next one at the
	// receiver, and burst 1 leaves no jitter margin.) A's pace, 2/s, would
	// have taken ten times as long, past the wait above.
	span := times[len(times)-1].Sub(times[0])
	if least := time.Duration(handed-2) * time.Second / 20; span < least {
		t.Errorf("B delivered %d in %v, faster than its 20/s allows (%v)", handed, span, least)
	}
	t.Logf("B's busiest second: %d; first to last %v", maxWindow(times, time.Second), times[len(times)-1].Sub(times[0]))
}

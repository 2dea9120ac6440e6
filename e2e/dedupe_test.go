package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A receiver can de-duplicate. Every attempt carries the id of
// the 202 and the attempt number, the same id on a retry after a 503 and
// after the message was dead-lettered and replayed; a replay or purge of
// an id that does not exist says so and exits non-zero.
func TestReceiverSeesIDAndAttempt(t *testing.T) {
	t.Parallel()
	var gone atomic.Bool
	gone.Store(true)
	rc := NewReceiver(t)
	rc.Handle = func(w http.ResponseWriter, r *http.Request, _ int) {
		switch {
		case r.URL.Path == "/flaky" && r.Header.Get("X-Hookpace-Attempt") == "1":
			w.WriteHeader(http.StatusServiceUnavailable)
		case r.URL.Path == "/gone" && gone.Load():
			w.WriteHeader(http.StatusGone)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {backoff_initial: 10ms, backoff_max: 50ms}
`, rc.Host()))
	c := hp.Client()
	ids := map[string]string{}
	for _, path := range []string{"/flaky", "/gone"} {
		status, id := hp.Post(c, rc.URL+path, WebhookBody(1), http.Header{"X-Hookpace-Id": {"from-the-app"}})
		if status != http.StatusAccepted || len(id) != 32 {
			t.Fatalf("POST %s: %d, id %q", path, status, id)
		}
		ids[path] = id
	}
	rc.WaitFor(t, 10*time.Second, "the 503, the retry and the 410", func(as []Arrival) bool { return len(as) >= 3 })
	Poll(t, 10*time.Second, "one dead letter", func() bool { total, _ := failDeadList(t, hp); return total == 1 })

	// checkIDs: every arrival for path carries its 202's id and the
	// attempt numbers want, in order.
	checkIDs := func(path string, want ...string) {
		t.Helper()
		var got []string
		for _, a := range rc.Arrivals() {
			if a.Path != path {
				continue
			}
			if id := a.Header.Get("X-Hookpace-Id"); id != ids[path] {
				t.Errorf("%s: X-Hookpace-Id %q, want the 202's %s", path, id, ids[path])
			}
			got = append(got, a.Header.Get("X-Hookpace-Attempt"))
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: attempts %v, want %v", path, got, want)
		}
	}
	checkIDs("/flaky", "1", "2")
	checkIDs("/gone", "1")

	// Ids that are not dead letters: nothing is done, the command says
	// which id and fails.
	for _, cmd := range []string{"replay", "purge"} {
		out, err := hp.CLI("dead", cmd, "00000000000000ff")
		if err == nil || !strings.Contains(out, "no dead letter with id 00000000000000ff") {
			t.Errorf("dead %s of a missing id: %v\n%s", cmd, err, out)
		}
		out, err = hp.CLI("dead", cmd, ids["/gone"], "00000000000000ff")
		if err == nil || !strings.Contains(out, "nothing") {
			t.Errorf("dead %s of a real and a missing id: %v\n%s", cmd, err, out)
		}
	}
	if total, _ := failDeadList(t, hp); total != 1 {
		t.Fatalf("%d dead letters after refused commands, want the 1 untouched", total)
	}
	dedupeDeadGauges(t, hp, rc.Host(), 1)

	// Replayed while the partner still answers 410, it dies again and is
	// listed under the same id; replayed once more, it is delivered with
	// that id, its attempts counted afresh.
	if out, err := hp.CLI("dead", "replay", ids["/gone"]); err != nil || !strings.Contains(out, "replayed 1") {
		t.Fatalf("dead replay %s: %v\n%s", ids["/gone"], err, out)
	}
	rc.WaitFor(t, 10*time.Second, "the replay's 410", func(as []Arrival) bool { return len(as) >= 4 })
	Poll(t, 10*time.Second, "dead again", func() bool { total, _ := failDeadList(t, hp); return total == 1 })
	if _, dead := failDeadList(t, hp); dead[0].ID != ids["/gone"] {
		t.Errorf("dead again as %s, want its 202's id %s", dead[0].ID, ids["/gone"])
	}
	gone.Store(false)
	if out, err := hp.CLI("dead", "replay", ids["/gone"]); err != nil || !strings.Contains(out, "replayed 1") {
		t.Fatalf("second dead replay %s: %v\n%s", ids["/gone"], err, out)
	}
	rc.WaitFor(t, 10*time.Second, "the replay delivered", func(as []Arrival) bool { return Delivered2xx(as) >= 2 })
	checkIDs("/gone", "1", "1", "1")
	Poll(t, 10*time.Second, "no dead letters", func() bool { total, _ := failDeadList(t, hp); return total == 0 })
	dedupeDeadGauges(t, hp, rc.Host(), 0)
}

// dedupeDeadGauges checks /metrics against `hookpace dead list`: the total
// dead-letter gauge and host's own series (absent when it has none).
func dedupeDeadGauges(t *testing.T, hp *Hookpace, host string, want int) {
	t.Helper()
	total, _ := failDeadList(t, hp)
	var all, own string
	for _, line := range strings.Split(hp.Metrics(), "\n") {
		switch {
		case strings.HasPrefix(line, "hookpace_dead_letters "):
			all = strings.TrimPrefix(line, "hookpace_dead_letters ")
		case strings.HasPrefix(line, `hookpace_host_dead_letters{host="`+host+`"} `):
			own = line[strings.LastIndex(line, " ")+1:]
		}
	}
	wantOwn := fmt.Sprint(want)
	if want == 0 {
		wantOwn = ""
	}
	if total != want || all != fmt.Sprint(want) || own != wantOwn {
		t.Errorf("dead list %d, hookpace_dead_letters %q, hookpace_host_dead_letters{host=%q} %q; want %d each (no series for 0)",
			total, all, host, own, want)
	}
}

// Breaker transitions are logged once each: a host that fails opens its
// breaker, the probe after the cooldown fails and opens it again, the
// next probe succeeds and closes it.
func TestBreakerTransitionsLogged(t *testing.T) {
	t.Parallel()
	var failing atomic.Bool
	failing.Store(true)
	rc := NewReceiver(t)
	rc.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {concurrency: 1, breaker_failures: 2, breaker_cooldown: 1s, backoff_initial: 10ms, backoff_max: 20ms, max_attempts: 100}
`, rc.Host()))
	if status, _ := hp.Post(hp.Client(), rc.URL+"/hook", WebhookBody(1), nil); status != http.StatusAccepted {
		t.Fatalf("POST: %d", status)
	}
	count := func(msg string) int { return strings.Count(hp.Log(), msg) }
	Poll(t, 10*time.Second, "the breaker opened after the first probe failed",
		func() bool { return count("breaker opened") >= 2 && count("breaker half-open") >= 1 })
	failing.Store(false)
	rc.WaitFor(t, 10*time.Second, "the delivery", func(as []Arrival) bool { return Delivered2xx(as) == 1 })
	Poll(t, 10*time.Second, "breaker closed", func() bool { return count("breaker closed") == 1 })
	log := hp.Log()
	// Opened once from closed, then once more for each failed probe; the
	// last probe closed it.
	if opened, probes := count("breaker opened"), count("breaker half-open"); opened != probes {
		t.Errorf("%d opened lines for %d probes: want one each, the first from closed\n%s", opened, probes, log)
	}
	if !strings.Contains(log, "from=closed") || !strings.Contains(log, "probe_at=") {
		t.Errorf("the first opened line should say from=closed and probe_at:\n%s", log)
	}
}

// While a host's breaker is open, /v1/hosts/{host} and `hookpace status`
// say when the probe goes.
func TestBreakerProbeTimeShown(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	rc.Handle = func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(http.StatusServiceUnavailable) }
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {breaker_failures: 1, breaker_cooldown: 10m}
`, rc.Host()))
	if status, _ := hp.Post(hp.Client(), rc.URL+"/hook", WebhookBody(1), nil); status != http.StatusAccepted {
		t.Fatalf("POST: %d", status)
	}
	Poll(t, 10*time.Second, "breaker opened", func() bool { return strings.Contains(hp.Log(), "breaker opened") })
	var st struct {
		Breaker        string
		BreakerProbeAt *time.Time `json:"breaker_probe_at"`
	}
	hp.AdminJSON("/v1/hosts/"+rc.Host(), &st)
	if st.Breaker != "open" || st.BreakerProbeAt == nil || time.Until(*st.BreakerProbeAt) < 9*time.Minute {
		t.Fatalf("breaker %q, probe at %v; want open with the probe about 10 minutes away", st.Breaker, st.BreakerProbeAt)
	}
	out, err := hp.CLI("status")
	if want := "open (probe " + st.BreakerProbeAt.Local().Format("15:04:05") + ")"; err != nil || !strings.Contains(out, want) {
		t.Errorf("status does not show %q: %v\n%s", want, err, out)
	}
}

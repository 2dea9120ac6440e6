package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Metrics values, tracing across the spool, live
// reload, graceful shutdown, the operator CLI and health endpoints.

const (
	opsTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	opsTraceparent = "00-" + opsTraceID + "-00f067aa0ba902b7-01"
)

// TestMetricsValues: after traffic to a delivering host D and a host H that
// answers 429 Retry-After: 30, /metrics counts exactly what happened.
func TestMetricsValues(t *testing.T) {
	t.Parallel()
	rcD, rcH := NewReceiver(t), NewReceiver(t)
	rcH.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
	}
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 100/s}
  "%s": {rate: 100/s}
`, rcD.Host(), rcH.Host()))
	D, H := rcD.Host(), rcH.Host()
	const nD, nH = 12, 5
	c := hp.Client()
	accepted := 0
	for i := range nD {
		if status, _ := hp.Post(c, fmt.Sprintf("%s/d/%d", rcD.URL, i), []byte("d"), nil); status == http.StatusAccepted {
			accepted++
		}
	}
	for i := range nH {
		if status, _ := hp.Post(c, fmt.Sprintf("%s/h/%d", rcH.URL, i), []byte("hh"), nil); status == http.StatusAccepted {
			accepted++
		}
	}
	if accepted != nD+nH {
		t.Fatalf("%d of %d accepted", accepted, nD+nH)
	}
	rcD.WaitFor(t, 10*time.Second, "all of D delivered", func(as []Arrival) bool { return Delivered2xx(as) >= nD })
	rcH.WaitFor(t, 10*time.Second, "a 429 from H", func(as []Arrival) bool { return len(as) >= 1 })
	// The receivers count a request before hookpace has read the answer;
	// wait until hookpace has settled both hosts.
	Poll(t, 10*time.Second, "D drained and H held", func() bool {
		d, h := secHost(t, hp, D), secHost(t, hp, H)
		return d.Queued == 0 && d.InFlight == 0 && h.InFlight == 0 && h.HeldUntil != nil
	})
	// An attempt's slot is given back before its outcome is counted.
	heldAttempts := float64(rcH.Count(nil))
	var m string
	Poll(t, 10*time.Second, "every settled attempt counted", func() bool {
		m = hp.Metrics()
		return opsSeries(m, "hookpace_deliveries_total", map[string]string{"host": D, "outcome": "delivered"}) >= nD &&
			opsSeries(m, "hookpace_delivery_latency_seconds_count", map[string]string{"host": D}) >= nD &&
			opsSeries(m, "hookpace_deliveries_total", map[string]string{"host": H, "outcome": "held"}) >= heldAttempts
	})
	check := func(name string, labels map[string]string, want float64) {
		t.Helper()
		if got := opsSeries(m, name, labels); got != want {
			t.Errorf("%s%v = %v, want %v", name, labels, got, want)
		}
	}
	check("hookpace_ingest_requests_total", map[string]string{"outcome": "accepted"}, float64(accepted))
	check("hookpace_deliveries_total", map[string]string{"host": D, "outcome": "delivered"}, nD)
	check("hookpace_deliveries_total", map[string]string{"host": H, "outcome": "held"}, heldAttempts)
	check("hookpace_deliveries_total", map[string]string{"host": H, "outcome": "delivered"}, -1)
	check("hookpace_host_held", map[string]string{"host": H}, 1)
	check("hookpace_host_held", map[string]string{"host": D}, 0)
	check("hookpace_spool_messages", nil, nH)
	check("hookpace_spool_messages", map[string]string{"host": H}, nH)
	check("hookpace_delivery_latency_seconds_count", map[string]string{"host": D}, nD)
	if heldAttempts < 1 {
		t.Errorf("no held attempt at H")
	}
	if v := opsSeries(m, "hookpace_spool_bytes", nil); v < nH*2 {
		t.Errorf("hookpace_spool_bytes = %v, want at least the %d body bytes queued for H", v, nH*2)
	}
	for _, name := range []string{"hookpace_host_rate", "hookpace_host_in_flight"} {
		if opsSeries(m, name, map[string]string{"host": H}) < 0 {
			t.Errorf("%s{host=%q} missing", name, H)
		}
	}
	if !regexp.MustCompile(`(?m)^http_client_request_duration_seconds_count\{[^}]*\} [1-9]`).MatchString(m) {
		t.Errorf("http_client_request_duration_seconds missing or zero")
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", opsGrep(m, "hookpace_", "http_client"))
	}
	t.Logf("accepted %d, delivered to D %d, held attempts at H %d", accepted, nD, int(heldAttempts))

	var hosts struct{ Hosts []map[string]any }
	hp.AdminJSON("/v1/hosts", &hosts)
	var row map[string]any
	for _, h := range hosts.Hosts {
		if h["host"] == H {
			row = h
		}
	}
	if row == nil {
		t.Fatalf("/v1/hosts has no row for %s: %v", H, hosts)
	}
	for _, k := range []string{"host", "queued", "in_flight", "held_until"} {
		if _, ok := row[k]; !ok {
			t.Errorf("/v1/hosts row for H lacks %q: %v", k, row)
		}
	}
	if row["queued"] != float64(nH) || row["held_until"] == nil {
		t.Errorf("/v1/hosts H: queued %v held_until %v, want %d and a time", row["queued"], row["held_until"], nH)
	}
}

// TestBackpressureAndReadyz: /healthz and /readyz answer 200; once the
// spool passes its high-water mark, new webhooks get 429 (counted as
// rejected_backpressure) and /readyz answers 503.
func TestBackpressureAndReadyz(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	rc.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
	}
	// The harness merges only a block-style spool: section.
	hp := Start(t, `
spool:
  max_messages: 10
egress: {allow: ["127.0.0.0/8"]}
`)
	for _, path := range []string{"/healthz", "/readyz"} {
		if code := opsAdminCode(t, hp, path); code != http.StatusOK {
			t.Fatalf("GET %s: %d, want 200", path, code)
		}
	}
	c := hp.Client()
	accepted, refused := 0, 0
	for i := range 20 {
		status, hdr, body := PostRaw(t, c, fmt.Sprintf("%s/bp/%d", rc.URL, i), []byte("x"), nil)
		switch status {
		case http.StatusAccepted:
			accepted++
		case http.StatusTooManyRequests:
			refused++
			if hdr.Get("Retry-After") == "" {
				t.Errorf("backpressure 429 without Retry-After: %s", body)
			}
		default:
			t.Fatalf("webhook %d: status %d %s", i, status, body)
		}
	}
	if refused == 0 || accepted == 0 {
		t.Fatalf("accepted %d, refused %d: want both with max_messages 10", accepted, refused)
	}
	m := hp.Metrics()
	if v := opsSeries(m, "hookpace_ingest_requests_total", map[string]string{"outcome": "rejected_backpressure"}); v != float64(refused) {
		t.Errorf("rejected_backpressure = %v, want %d", v, refused)
	}
	if v := opsSeries(m, "hookpace_ingest_requests_total", map[string]string{"outcome": "accepted"}); v != float64(accepted) {
		t.Errorf("accepted = %v, want %d", v, accepted)
	}
	if code := opsAdminCode(t, hp, "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz past high water: %d, want 503", code)
	}
	if code := opsAdminCode(t, hp, "/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz past high water: %d, want 200", code)
	}
	t.Logf("max_messages 10, high_water 0.8: accepted %d, refused %d", accepted, refused)
}

// TestTraceThroughSpool: an incoming traceparent reaches the destination
// with the same trace id, with tracing off (the default) and on.
func TestTraceThroughSpool(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, cfg string }{
		{"tracing off", ""},
		{"stdout exporter", "telemetry: {traces: {exporter: stdout}}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := NewReceiver(t)
			hp := Start(t, `egress: {allow: ["127.0.0.0/8"]}`+"\n"+tc.cfg)
			if status, _ := hp.Post(hp.Client(), rc.URL+"/traced", []byte("t"), http.Header{"Traceparent": {opsTraceparent}}); status != http.StatusAccepted {
				t.Fatalf("status %d", status)
			}
			rc.WaitFor(t, 10*time.Second, "the traced webhook", func(as []Arrival) bool { return len(as) >= 1 })
			tp := rc.Arrivals()[0].Header.Get("Traceparent")
			parts := strings.Split(tp, "-")
			if len(parts) != 4 || parts[1] != opsTraceID {
				t.Fatalf("receiver got traceparent %q, want trace id %s", tp, opsTraceID)
			}
			t.Logf("receiver traceparent %s", tp)
			if tc.cfg == "" {
				return
			}
			// The stdout exporter writes one JSON span per line.
			want := map[string]bool{"hookpace.ingest": false, "hookpace.deliver": false}
			Poll(t, 10*time.Second, "ingest and deliver spans on stdout", func() bool {
				for _, line := range strings.Split(hp.Log(), "\n") {
					var s struct {
						Name    string `json:"name"`
						TraceID string `json:"trace_id"`
					}
					if json.Unmarshal([]byte(line), &s) == nil && s.TraceID == opsTraceID {
						if _, ok := want[s.Name]; ok {
							want[s.Name] = true
						}
					}
				}
				return want["hookpace.ingest"] && want["hookpace.deliver"]
			})
		})
	}
}

// TestReload: a rewritten config applies without a restart; an invalid
// one is refused and the old rate stays in force.
func TestReload(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s":
    rate: 5/s
    burst: 1
`, rc.Host()))
	pid := hp.cmd.Process.Pid
	PostAll(t, hp, 200, 32, func(i int) string { return fmt.Sprintf("%s/r/%d", rc.URL, i) })
	orig, err := os.ReadFile(hp.Config)
	if err != nil {
		t.Fatal(err)
	}
	rc.WaitFor(t, 10*time.Second, "first deliveries at 5/s", func(as []Arrival) bool { return len(as) >= 3 })

	// Invalid: the fast rate with a misspelt key. None of it may apply.
	bad := strings.Replace(strings.Replace(string(orig), "rate: 5/s", "rate: 100/s", 1), "burst: 1", "brust: 1", 1)
	opsRewriteConfig(t, hp, bad)
	Poll(t, 10*time.Second, "the invalid config to be rejected", func() bool {
		return strings.Contains(hp.Log(), "config reload rejected")
	})
	n0, t0 := rc.Count(nil), time.Now()
	rc.WaitFor(t, 10*time.Second, "5 more deliveries", func(as []Arrival) bool { return len(as) >= n0+5 })
	if took := time.Since(t0); took < 600*time.Millisecond {
		t.Fatalf("5 deliveries in %v after an invalid reload: the old 5/s rate was not kept", took)
	} else {
		t.Logf("after the rejected reload: 5 deliveries in %v (5/s)", took.Round(time.Millisecond))
	}
	if strings.Contains(hp.Log(), "config reloaded") {
		t.Fatalf("the invalid config was reported as reloaded:\n%s", hp.Log())
	}

	// Valid: 100/s.
	good := strings.Replace(string(orig), "rate: 5/s", "rate: 100/s", 1)
	before := rc.Count(nil)
	changed := time.Now()
	opsRewriteConfig(t, hp, good)
	rc.WaitFor(t, 8*time.Second, "all 200 after the reload", func(as []Arrival) bool { return len(as) >= 200 })
	took := time.Since(changed)
	if hp.cmd.Process.Pid != pid || hp.cmd.ProcessState != nil {
		t.Fatalf("hookpace restarted or exited during the reload")
	}
	Poll(t, 5*time.Second, `"config reloaded" in the log`, func() bool { return strings.Contains(hp.Log(), "config reloaded") })
	t.Logf("%d left at the reload; all 200 arrived %v after it", 200-before, took.Round(time.Millisecond))
	if n := rc.Count(nil); n != 200 {
		t.Errorf("%d arrivals, want 200", n)
	}
}

// TestGracefulShutdown: SIGTERM mid-delivery exits 0, and after a restart
// every acknowledged webhook arrives.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	rc.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		time.Sleep(100 * time.Millisecond) // a slow partner keeps deliveries in flight
	}
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
shutdown: {timeout: 5s}
hosts:
  "%s": {rate: 20/s, burst: 1, concurrency: 4}
`, rc.Host()))
	const n = 300
	acked := PostAll(t, hp, n, 32, func(i int) string { return fmt.Sprintf("%s/g/%d", rc.URL, i) })
	rc.WaitFor(t, 10*time.Second, "deliveries under way", func(as []Arrival) bool { return len(as) >= 30 })
	inFlight := secHost(t, hp, rc.Host()).InFlight
	atSignal := rc.Count(nil)
	start := time.Now()
	hp.Signal(syscall.SIGTERM)
	if code := hp.Wait(15 * time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0\n%s", code, hp.Log())
	}
	stopped := time.Since(start)
	if !strings.Contains(hp.Log(), "hookpace stopped") {
		t.Errorf("no \"hookpace stopped\" line:\n%s", hp.Log())
	}
	atStop := rc.Count(nil)
	t.Logf("SIGTERM with %d in flight and %d arrived; exit 0 after %v; %d arrived during the shutdown",
		inFlight, atSignal, stopped.Round(time.Millisecond), atStop-atSignal)

	// Restart faster so the test stays short; what matters is what arrives.
	orig, _ := os.ReadFile(hp.Config)
	if err := os.WriteFile(hp.Config, []byte(strings.Replace(string(orig), "rate: 20/s, burst: 1, concurrency: 4", "rate: 500/s, burst: 50, concurrency: 32", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	hp.Restart()
	rc.WaitFor(t, 20*time.Second, "every acknowledged webhook", func(as []Arrival) bool {
		return len(opsNotArrived(as, acked)) == 0
	})
	seen := map[string]int{}
	for _, a := range rc.Arrivals() {
		seen[a.Path]++
	}
	var dups []string
	for p, k := range seen {
		if k > 1 {
			dups = append(dups, fmt.Sprintf("%s x%d", p, k))
		}
	}
	t.Logf("%d acknowledged, %d distinct arrived, %d duplicates %v", len(acked), len(seen), len(dups), dups)
}

// TestShutdownGivesUpOnAFailedSpool: the spool directory is removed under
// a running hookpace, as with a failed volume. New webhooks get 503 and
// /readyz fails. Badger then retries its final memtable flush forever, and
// SIGTERM must still end the process, with an error exit that says why,
// rather than hang until a SIGKILL.
func TestShutdownGivesUpOnAFailedSpool(t *testing.T) {
	t.Parallel()
	hp := Start(t, `
egress: {allow: ["127.0.0.0/8"]}
shutdown: {timeout: 1s}
`)
	// Nothing listens on this port: the webhook stays queued, so the
	// memtable has something to flush at close.
	target := "http://" + deadPort(t) + "/never"
	if code, body := hp.Post(hp.Client(), target, []byte(`{"n":1}`), nil); code != http.StatusAccepted {
		t.Fatalf("POST: %d %s", code, body)
	}
	if err := os.RemoveAll(filepath.Join(hp.Dir, "spool")); err != nil {
		t.Fatal(err)
	}
	// Badger would write on into the unlinked files: no 202 for that.
	if code, id := hp.Post(hp.Client(), target, []byte(`{"n":2}`), nil); code != http.StatusServiceUnavailable {
		t.Fatalf("POST after the spool directory was removed: %d (id %q), want 503", code, id)
	}
	resp, err := http.Get("http://" + hp.Admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz: %d with the spool directory gone, want 503", resp.StatusCode)
	}
	hp.Signal(syscall.SIGTERM)
	// The liveness bound is generous: what matters is that it exits.
	if code := hp.Wait(60 * time.Second); code == 0 {
		t.Fatalf("exit code 0 after a spool that could not be closed\n%s", hp.Log())
	}
	if !strings.Contains(hp.Log(), "spool directory removed or replaced underneath") {
		t.Errorf("the log does not say why webhooks got 503:\n%s", hp.Log())
	}
	if !strings.Contains(hp.Log(), "exiting without a clean close") {
		t.Errorf("the log does not say why it exited:\n%s", hp.Log())
	}
}

// TestStatusPauseResume: `hookpace status` shows the busy host; pause
// stops deliveries to it and resume restarts them.
func TestStatusPauseResume(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 5/s, burst: 1}
`, rc.Host()))
	H := rc.Host()
	PostAll(t, hp, 60, 32, func(i int) string { return fmt.Sprintf("%s/s/%d", rc.URL, i) })
	rc.WaitFor(t, 10*time.Second, "deliveries under way", func(as []Arrival) bool { return len(as) >= 2 })

	out, err := hp.CLI("status")
	if err != nil {
		t.Fatalf("hookpace status: %v\n%s", err, out)
	}
	header, row := "", ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "HOST") {
			header = l
		}
		if f := strings.Fields(l); len(f) > 0 && f[0] == H {
			row = l
		}
	}
	for _, col := range []string{"HOST", "QUEUED", "IN FLIGHT", "RATE", "HELD UNTIL", "BREAKER"} {
		if !strings.Contains(header, col) {
			t.Errorf("status header %q lacks %s", header, col)
		}
	}
	if f := strings.Fields(row); len(f) < 2 || f[1] == "0" {
		t.Errorf("status has no busy row for %s:\n%s", H, out)
	}
	t.Logf("hookpace status:\n%s", out)

	// hostCmd runs `hookpace pause|resume HOST --admin ADDR` as hp.CLI
	// does (flags after the argument). If the CLI refuses that order, it
	// records the failure and carries on with the flags first, so that
	// pause and resume themselves are still tested.
	hostCmd := func(cmd string) {
		t.Helper()
		out, err := hp.CLI(cmd, H)
		if err == nil {
			return
		}
		first, _, _ := strings.Cut(out, "\n")
		t.Errorf("hookpace %s HOST --admin ADDR: %v: %s", cmd, err, first)
		if out, err := exec.Command(binary, cmd, "--admin", hp.Admin, H).CombinedOutput(); err != nil {
			t.Fatalf("hookpace %s --admin ADDR HOST: %v\n%s", cmd, err, out)
		}
	}

	hostCmd("pause")
	Poll(t, 10*time.Second, "attempts in flight to finish", func() bool { return secHost(t, hp, H).InFlight == 0 })
	paused := rc.Count(nil)
	<-time.After(1500 * time.Millisecond) // at 5/s, ~7 would arrive if pause did nothing
	if n := rc.Count(nil); n != paused {
		t.Fatalf("%d arrivals while paused", n-paused)
	}
	if out, _ := hp.CLI("status"); !strings.Contains(out, "paused") {
		t.Errorf("status does not show the pause:\n%s", out)
	}

	// The pause outlives a crash: after kill -9 and a restart the host is
	// still paused, with its backlog.
	hp.Kill()
	hp.Restart()
	if st := secHost(t, hp, H); !st.Paused || st.Queued != int64(60-paused) {
		t.Fatalf("after kill -9 and a restart: paused %v, queued %d; want paused with %d queued", st.Paused, st.Queued, 60-paused)
	}
	if n := rc.Count(nil); n != paused {
		t.Fatalf("%d arrivals after the restart while paused", n-paused)
	}

	hostCmd("resume")
	rc.WaitFor(t, 5*time.Second, "deliveries after resume", func(as []Arrival) bool { return len(as) >= paused+3 })
	t.Logf("paused at %d arrivals, none in 1.5s nor across a kill -9; resumed", paused)
	// The resume is recorded too: after another restart nothing is paused.
	hp.Kill()
	hp.Restart()
	if st := secHost(t, hp, H); st.Paused {
		t.Fatalf("paused again after resume and a restart: %+v", st)
	}
}

// opsNotArrived returns the acknowledged paths not among the arrivals.
func opsNotArrived(as []Arrival, acked map[string]bool) []string {
	got := make(map[string]bool, len(as))
	for _, a := range as {
		got[a.Path] = true
	}
	var out []string
	for p := range acked {
		if !got[p] {
			out = append(out, p)
		}
	}
	return out
}

// opsRewriteConfig replaces hookpace's config file atomically and sends SIGHUP.
func opsRewriteConfig(t *testing.T, hp *Hookpace, content string) {
	t.Helper()
	tmp := hp.Config + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, hp.Config); err != nil {
		t.Fatal(err)
	}
	hp.Signal(syscall.SIGHUP)
}

func opsAdminCode(t *testing.T, hp *Hookpace, path string) int {
	t.Helper()
	resp, err := http.Get("http://" + hp.Admin + path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

var opsSeriesLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
var opsLabelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// opsSeries returns the value of the series with exactly this name and
// label set (nil: no labels) in Prometheus text, or -1 if there is none.
func opsSeries(text, name string, labels map[string]string) float64 {
	for _, line := range strings.Split(text, "\n") {
		m := opsSeriesLine.FindStringSubmatch(line)
		if m == nil || m[1] != name {
			continue
		}
		got := map[string]string{}
		for _, p := range opsLabelPair.FindAllStringSubmatch(m[2], -1) {
			got[p[1]] = p[2]
		}
		if len(got) != len(labels) {
			continue
		}
		same := true
		for k, v := range labels {
			if got[k] != v {
				same = false
			}
		}
		if same {
			v, err := strconv.ParseFloat(m[3], 64)
			if err != nil {
				return -1
			}
			return v
		}
	}
	return -1
}

// opsGrep returns the lines of text that start with one of prefixes.
func opsGrep(text string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

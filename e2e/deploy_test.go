package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// deployQueries returns every PromQL expression of the shipped alert rules
// and Grafana dashboard, each with where it comes from.
func deployQueries(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	rules, err := os.ReadFile("../deploy/prometheus/hookpace-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The rules file is checked by promtool in ./deploy; here the exprs are
	// only read: every "expr:" line, or the block below "expr: |".
	lines := strings.Split(string(rules), "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		e, ok := strings.CutPrefix(l, "expr:")
		if !ok {
			continue
		}
		e = strings.TrimSpace(e)
		if e == "|" {
			e = ""
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "          ") {
				i++
				e += lines[i] + "\n"
			}
		}
		out[e] = "rules line " + strings.TrimSpace(lines[i])
	}
	dash, err := os.ReadFile("../deploy/grafana/hookpace.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out[tg.Expr] = "dashboard panel " + p.Title
		}
	}
	if len(out) < 20 {
		t.Fatalf("only %d queries found in the rules and the dashboard", len(out))
	}
	return out
}

var (
	metricRef = regexp.MustCompile(`\b(hookpace_[a-z0-9_]+|http_client_[a-z0-9_]+)\b`)
	labelRef  = regexp.MustCompile(`\b(outcome|level|reason)="([a-z_]+)"`)
)

// TestDeployMetricsExist scrapes the real binary after it has delivered,
// held, retried and dead-lettered, runs promtool check metrics on the
// scrape, and checks that every metric (and every outcome, level and
// reason label value) that the alert rules and the dashboard use is in it:
// renaming a metric breaks this test, not the dashboard.
func TestDeployMetricsExist(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is needed (Debian package prometheus; .ci/run installs it)")
	}
	hp, _, _, _, _ := startFourHosts(t)
	scrape := hp.Metrics()
	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = strings.NewReader(scrape)
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics on a real scrape: %v\n%s", err, out)
	}
	os.WriteFile(filepath.Join(artifactDir(t), "metrics.txt"), []byte(scrape), 0o644)
	// hookpace_batch_webhooks_total appears once a batch was delivered: a
	// second hookpace, with a batching host, delivers one.
	rc := NewReceiver(t)
	hb := Start(t, fmt.Sprintf("egress: {allow: [\"127.0.0.0/8\"]}\nhosts:\n  %q: {batch: {max_events: 2, max_wait: 0s}}\n", rc.Host()))
	PostAll(t, hb, 1, 1, func(int) string { return rc.URL + "/hook" })
	rc.WaitFor(t, 10*time.Second, "a batch", func(as []Arrival) bool { return Delivered2xx(as) == 1 })
	Poll(t, 10*time.Second, "the batch counted", func() bool { return strings.Contains(hb.Metrics(), "hookpace_batch_webhooks_total{") })
	scrape += hb.Metrics()

	families := map[string]bool{}
	for _, l := range strings.Split(scrape, "\n") {
		if rest, ok := strings.CutPrefix(l, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			families[name] = true
			if typ == "histogram" {
				for _, s := range []string{"_bucket", "_count", "_sum"} {
					families[name+s] = true
				}
			}
		}
	}
	var used []string
	for q, where := range deployQueries(t) {
		for _, m := range metricRef.FindAllString(q, -1) {
			if !families[m] {
				t.Errorf("%s uses %s, which a real scrape does not have: %s", where, m, q)
			}
			used = append(used, m)
		}
		for _, m := range labelRef.FindAllStringSubmatch(q, -1) {
			if !strings.Contains(scrape, m[0]) {
				t.Errorf("%s selects %s, which no series of a real scrape has: %s", where, m[0], q)
			}
		}
	}
	slices.Sort(used)
	t.Logf("metrics used by the rules and the dashboard: %v", slices.Compact(used))
}

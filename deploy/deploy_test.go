// Package deploy holds what operators install next to hookpace: the
// Grafana dashboard (grafana/hookpace.json) and the Prometheus alert rules
// (prometheus/hookpace-rules.yaml). These tests check them with promtool;
// e2e's TestDeployMetricsExist checks every metric they use against a
// scrape of the real binary.
package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func promtool(t *testing.T, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is needed (Debian package prometheus; .ci/run installs it)")
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = "prometheus"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestRules runs promtool check rules, and promtool test rules: each alert
// fires on the series that should raise it and not on the others.
func TestRules(t *testing.T) {
	out := promtool(t, "check", "rules", "hookpace-rules.yaml")
	t.Log(out)
	if !strings.Contains(out, "SUCCESS: 7 rules found") {
		t.Errorf("promtool check rules: %s", out)
	}
	t.Log(promtool(t, "test", "rules", "hookpace-rules.test.yaml"))

	// Every alert has a summary and a runbook link to its section of
	// docs/alerts.md, and that section exists.
	rules, _ := os.ReadFile("prometheus/hookpace-rules.yaml")
	runbook, err := os.ReadFile("../docs/alerts.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(rules), "\n") {
		name, ok := strings.CutPrefix(strings.TrimSpace(l), "- alert: ")
		if !ok {
			continue
		}
		n++
		anchor := "alert-" + strings.ToLower(name)
		if !strings.Contains(string(rules), `runbook_url: "docs/alerts.md#`+anchor+`"`) {
			t.Errorf("%s: no runbook_url docs/alerts.md#%s", name, anchor)
		}
		if !strings.Contains(string(runbook), `<a id="`+anchor+`"></a>`) {
			t.Errorf("%s: docs/alerts.md has no runbook anchor %s", name, anchor)
		}
	}
	if n != 7 || strings.Count(string(rules), "summary:") != n {
		t.Errorf("%d alerts, %d summaries; want 7 alerts, each with a summary", n, strings.Count(string(rules), "summary:"))
	}
}

// TestDashboard checks the dashboard's structure: JSON Grafana imports,
// unique panel ids, a data source variable on every query, no panels
// overlapping.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile("grafana/hookpace.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID, Title    string
		SchemaVersion int
		Panels        []struct {
			ID         int
			Type       string
			Title      string
			Datasource *struct{ UID string }
			GridPos    struct{ X, Y, W, H int }
			Targets    []struct {
				Expr       string
				Datasource *struct{ UID string }
			}
		}
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	if d.UID != "hookpace" || d.Title != "hookpace" || d.SchemaVersion == 0 {
		t.Errorf("uid %q, title %q, schemaVersion %d", d.UID, d.Title, d.SchemaVersion)
	}
	ids := map[int]bool{}
	cells := map[[2]int]string{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
			for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
				if other, ok := cells[[2]int{x, y}]; ok {
					t.Errorf("panels %q and %q overlap at %d,%d", p.Title, other, x, y)
				}
				cells[[2]int{x, y}] = p.Title
			}
		}
		if p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q is wider than the grid", p.Title)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: no ${datasource} or no queries", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Expr == "" || tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: a query without an expression or ${datasource}", p.Title)
			}
			if !strings.Contains(tg.Expr, `instance=~"$instance"`) {
				t.Errorf("panel %q: %s ignores the instance variable", p.Title, tg.Expr)
			}
		}
	}
	for _, want := range []string{"Ingest by outcome", "Spool usage against the watermarks", "Backlog per host",
		"Oldest queued message per host", "Deliveries by outcome", "429s and holds",
		"Delivery latency (enqueue to delivery)", "Breaker open", "Dead letters"} {
		found := false
		for _, p := range d.Panels {
			found = found || p.Title == want
		}
		if !found {
			t.Errorf("no panel %q", want)
		}
	}
}

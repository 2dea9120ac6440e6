package charts

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// prometheusRule is the Prometheus Operator's PrometheusRule
// (monitoring.coreos.com/v1), as much of it as the chart may set: decoded
// strictly, a field the CRD does not have fails the test.
type prometheusRule struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Groups []struct {
			Name     string `json:"name"`
			Interval string `json:"interval,omitempty"`
			Rules    []struct {
				Alert       string            `json:"alert,omitempty"`
				Record      string            `json:"record,omitempty"`
				Expr        string            `json:"expr"`
				For         string            `json:"for,omitempty"`
				Labels      map[string]string `json:"labels,omitempty"`
				Annotations map[string]string `json:"annotations,omitempty"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

// The chart ships copies of deploy/'s rules and dashboard (helm reads only
// files inside the chart): they must not drift.
func TestMonitoringFilesMatchDeploy(t *testing.T) {
	for copyPath, orig := range map[string]string{
		"hookpace/files/hookpace-rules.yaml": "../deploy/prometheus/hookpace-rules.yaml",
		"hookpace/files/hookpace.json":       "../deploy/grafana/hookpace.json",
	} {
		a, err1 := os.ReadFile(copyPath)
		b, err2 := os.ReadFile(orig)
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs from %s (%v %v): cp %[2]s %[1]s", copyPath, orig, err1, err2)
		}
	}
}

func TestMonitoringOptional(t *testing.T) {
	for _, mode := range []string{"sidecar", "gateway"} {
		r := render(t, "mode="+mode)
		if len(r.rules) != 0 {
			t.Errorf("mode %s: a PrometheusRule by default", mode)
		}
		for name := range r.configMaps {
			if strings.HasSuffix(name, "-dashboard") {
				t.Errorf("mode %s: a dashboard ConfigMap by default", mode)
			}
		}
	}
}

func TestPrometheusRuleAndDashboard(t *testing.T) {
	r := render(t, "mode=gateway", "monitoring.prometheusRule.enabled=true", "monitoring.prometheusRule.labels.release=kps",
		"monitoring.grafanaDashboard.enabled=true", "monitoring.grafanaDashboard.annotations.grafana_folder=hookpace")
	pr := get(t, r.rules, "rel-hookpace")
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Metadata.Labels["release"] != "kps" {
		t.Errorf("PrometheusRule %s, labels %v", pr.APIVersion, pr.Metadata.Labels)
	}
	// The same groups as the plain rules file that promtool checks.
	var plain struct {
		Groups json.RawMessage `json:"groups"`
	}
	b, _ := os.ReadFile(filepath.Join("..", "deploy", "prometheus", "hookpace-rules.yaml"))
	if err := yaml.Unmarshal(b, &plain); err != nil {
		t.Fatal(err)
	}
	shipped, _ := json.Marshal(pr.Spec.Groups)
	var a, c any
	json.Unmarshal(plain.Groups, &a)
	json.Unmarshal(shipped, &c)
	if ja, _ := json.Marshal(a); string(ja) != string(mustJSON(c)) {
		t.Errorf("the PrometheusRule's groups differ from deploy/prometheus/hookpace-rules.yaml:\n%s\n%s", ja, mustJSON(c))
	}
	alerts := 0
	for _, g := range pr.Spec.Groups {
		for _, rule := range g.Rules {
			alerts++
			if rule.Annotations["summary"] == "" || !strings.HasPrefix(rule.Annotations["runbook_url"], "docs/alerts.md#alert-") {
				t.Errorf("%s: summary %q, runbook %q", rule.Alert, rule.Annotations["summary"], rule.Annotations["runbook_url"])
			}
		}
	}
	if alerts != 7 {
		t.Errorf("%d alerts, want 7", alerts)
	}

	cm := get(t, r.configMaps, "rel-hookpace-dashboard")
	if cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "hookpace" {
		t.Errorf("dashboard ConfigMap labels %v, annotations %v", cm.Labels, cm.Annotations)
	}
	want, _ := os.ReadFile(filepath.Join("..", "deploy", "grafana", "hookpace.json"))
	if got := cm.Data["hookpace.json"]; got != strings.TrimRight(string(want), "\n") || !json.Valid([]byte(got)) {
		t.Errorf("dashboard ConfigMap holds %d bytes, not deploy/grafana/hookpace.json (%d)", len(got), len(want))
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestSecurityContext: hookpace runs non-root, read-only, unprivileged,
// without capabilities and under the runtime's seccomp profile, in both
// modes (in sidecar mode, as hookpace inject adds it).
func TestSecurityContext(t *testing.T) {
	check := func(mode string, c corev1.Container) {
		sc := c.SecurityContext
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil ||
			len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || sc.SeccompProfile == nil ||
			sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
			t.Errorf("mode %s: hookpace securityContext = %s", mode, sprint(sc))
		}
	}
	check("sidecar", injected(t).Spec.Template.Spec.InitContainers[0])
	ss := get(t, render(t, "mode=gateway").statefulSets, "rel-hookpace")
	check("gateway", ss.Spec.Template.Spec.Containers[0])
	if ps := ss.Spec.Template.Spec.SecurityContext; ps == nil || ps.SeccompProfile == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
		t.Errorf("gateway pod securityContext = %s", sprint(ps))
	}
}

// TestRestartChecksum: the gateway's config is a mounted directory that
// hookpace reloads, so a change of a reloadable setting (a rate, the
// drain, the proxy users) leaves the pod template alone; a setting that
// needs a restart changes checksum/restart and rolls the pods. No
// checksum/config is left.
func TestRestartChecksum(t *testing.T) {
	sum := func(sets ...string) string {
		t.Helper()
		ss := get(t, render(t, append([]string{"mode=gateway"}, sets...)...).statefulSets, "rel-hookpace")
		a := ss.Spec.Template.Annotations
		if _, ok := a["checksum/config"]; ok {
			t.Errorf("checksum/config on the pod template: a config change would roll the pods")
		}
		for _, v := range ss.Spec.Template.Spec.Volumes {
			if v.Name == "config" && (v.Secret == nil || len(v.Secret.Items) != 0) {
				t.Errorf("config volume %s: want the whole Secret as a directory", sprint(v))
			}
		}
		for _, m := range ss.Spec.Template.Spec.Containers[0].VolumeMounts {
			if m.Name == "config" && m.SubPath != "" {
				t.Errorf("config mounted with subPath %q: the kubelet would never update it", m.SubPath)
			}
		}
		return a["checksum/restart"]
	}
	base := sum()
	if base == "" {
		t.Fatal("no checksum/restart")
	}
	for _, set := range []string{"hookpace.config.defaults.rate=5/s", "hookpace.shutdown.drainSeconds=3",
		"hookpace.config.hosts.api\\.example\\.com.rate=1/s", "gateway.auth.users[0].username=a,gateway.auth.users[0].password=b",
		"hookpace.config.log.level=debug"} {
		if got := sum(set); got != base {
			t.Errorf("--set %s (reloaded) changed checksum/restart", set)
		}
	}
	for _, set := range []string{"gateway.port=3128", "hookpace.config.spool.min_free=1GiB", "hookpace.config.log.format=text",
		"hookpace.fleet.redis=redis://redis:6379/0", "hookpace.config.admin=127.0.0.1:9091", "hookpace.config.dedupe.max_keys=5"} {
		if got := sum(set); got == base {
			t.Errorf("--set %s (needs a restart) left checksum/restart alone", set)
		}
	}
}

// TestRestartFieldsComplete: every setting that hookpace's config package
// says needs a restart (config.RestartRequired, "restart to apply") is in
// the chart's list of restart fields, so the gateway rolls for it.
func TestRestartFieldsComplete(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "config", "config.go"))
	if err != nil {
		t.Fatal(err)
	}
	body := string(src)
	i := strings.Index(body, "func RestartRequired(")
	if i < 0 {
		t.Fatal("config.RestartRequired not found")
	}
	body = body[i:]
	body = body[:strings.Index(body, "\n}\n")]
	names := regexp.MustCompile(`\{"([a-z_.]+)", old\.`).FindAllStringSubmatch(body, -1)
	if len(names) < 10 || !strings.Contains(body, "fleetRestart(") || !strings.Contains(body, "eventsRestart(") || !strings.Contains(body, "inboundRestart(") {
		t.Fatalf("found %d restart fields in RestartRequired: the test no longer reads it", len(names))
	}
	tpl, err := os.ReadFile(filepath.Join(chart, "templates", "_helpers.tpl"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`define "hookpace.restartFields" -}}\n(.*)\n`).FindSubmatch(tpl)
	if m == nil {
		t.Fatal("no hookpace.restartFields in _helpers.tpl")
	}
	chartFields := strings.Fields(string(m[1]))
	covered := func(f string) bool {
		for _, c := range chartFields {
			if f == c || strings.HasPrefix(f, c+".") {
				return true
			}
		}
		return false
	}
	fields := []string{"fleet.redis", "events", "inbound"} // and the rest of fleetRestart; eventsRestart names "events", inboundRestart "inbound"
	for _, n := range names {
		fields = append(fields, n[1])
	}
	for _, f := range fields {
		if !covered(f) {
			t.Errorf("%s needs a restart (config.RestartRequired) but is not in hookpace.restartFields", f)
		}
	}
}

// values.schema.json: helm rejects a typo'd or mistyped value.
func TestSchemaRejectsTypos(t *testing.T) {
	for _, set := range []string{"mdoe=gateway", "sidecar.configmap=x", "gateway.replicas=two", "mode=daemonset",
		"monitoring.prometheusRule.enabeld=true", "hookpace.shutdown.timeoutSeconds=0", "gateway.auth.users[0].user=a",
		"gateway.auth.open=yes", "app.image=nginx", "hookpace.spool.persistentVolumeClaim=c"} {
		_, err := helm(t, "template", "rel", chart, "--set", set)
		if err == nil || !strings.Contains(err.Error(), "schema") {
			t.Errorf("--set %s: %v, want a schema error", set, err)
		}
	}
	// hookpace.config is hookpace's own file: hookpace validates it.
	if _, err := helm(t, "template", "rel", chart, "--set", "hookpace.config.hosts.a\\.example.rate=5/s"); err != nil {
		t.Errorf("a host in hookpace.config: %v", err)
	}
}

// TestNotes: what NOTES.txt says, by mode and values.
func TestNotes(t *testing.T) {
	for _, c := range []struct {
		sets []string
		want []string
	}{
		{nil, []string{"ConfigMap hookpace in namespace hooks", "hookpace inject -f deploy.yaml | kubectl -n hooks apply -f -",
			"Kubernetes 1.29", "port-forward deploy/YOUR-APP 9090:9090", "http://127.0.0.1:9090/", "emptyDir"}},
		{[]string{"mode=gateway", "monitoring.prometheusRule.enabled=true"}, []string{
			"HTTP_PROXY=http://USER:PASSWORD@rel-hookpace.hooks.svc.cluster.local:8080", "pod/rel-hookpace-0", "PrometheusRule rel-hookpace",
			"localhost (127.0.0.1:9090)"}},
		{[]string{"monitoring.serviceMonitor.enabled=true", "monitoring.serviceMonitor.podSelector.app=web"}, []string{"ServiceMonitor rel-hookpace",
			"get secret rel-hookpace-admin", "hookpace status --config /etc/hookpace/config.yaml", "--admin-token-secret rel-hookpace-admin"}},
		{[]string{"sidecar.configMap=hp", "hookpace.config.listen=0.0.0.0:3128", "hookpace.config.spool.dir=/spool", "hookpace.shutdown.timeoutSeconds=45",
			"hookpace.image=registry.example.com/hookpace:1"}, []string{
			"hookpace inject -f deploy.yaml --configmap hp --image registry.example.com/hookpace:1 --proxy-port 3128 --spool-dir /spool --shutdown-timeout 45s |"}},
	} {
		n := notes(t, c.sets...)
		for _, w := range c.want {
			if !strings.Contains(n, w) {
				t.Errorf("NOTES with %v lack %q:\n%s", c.sets, w, n)
			}
		}
	}
}

// serviceMonitor is the Prometheus Operator's ServiceMonitor, as much of
// it as the chart sets, decoded strictly.
type serviceMonitor struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// TestServiceMonitor: in both modes the ServiceMonitor selects a Service
// that selects the hookpace pods on the admin port, and hookpace's admin
// listener moves to the pod's addresses behind a bearer token from a
// mounted Secret.
func TestServiceMonitor(t *testing.T) {
	for _, mode := range []string{"sidecar", "gateway"} {
		sets := []string{"mode=" + mode, "monitoring.serviceMonitor.enabled=true", "monitoring.serviceMonitor.labels.release=kps",
			"monitoring.serviceMonitor.interval=15s", "monitoring.serviceMonitor.podSelector.app=web"}
		r := render(t, sets...)
		sm := get(t, r.monitors, "rel-hookpace")
		if sm.APIVersion != "monitoring.coreos.com/v1" || sm.Metadata.Labels["release"] != "kps" || len(sm.Spec.Endpoints) != 1 ||
			sm.Spec.Endpoints[0] != (struct {
				Port     string `json:"port"`
				Path     string `json:"path"`
				Interval string `json:"interval"`
			}{"admin", "/metrics", "15s"}) {
			t.Errorf("mode %s: ServiceMonitor = %s", mode, sprint(*sm))
		}
		svc := get(t, r.services, "rel-hookpace-metrics")
		if !subset(sm.Spec.Selector.MatchLabels, svc.Labels) || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "admin" {
			t.Errorf("mode %s: metrics Service = %s", mode, sprint(svc))
		}
		var pod corev1.PodSpec
		var labels map[string]string
		var hp corev1.Container
		var cfg string
		if mode == "sidecar" {
			// The team's Deployment (labelled app: web), injected as NOTES.txt says.
			d := injected(t, sets...)
			pod, labels, hp = d.Spec.Template.Spec, d.Spec.Template.Labels, d.Spec.Template.Spec.InitContainers[0]
			cfg = get(t, r.configMaps, "hookpace").Data["config.yaml"]
		} else {
			ss := get(t, r.statefulSets, "rel-hookpace")
			pod, labels, hp = ss.Spec.Template.Spec, ss.Spec.Template.Labels, ss.Spec.Template.Spec.Containers[0]
			cfg = get(t, r.secrets, "rel-hookpace").StringData["config.yaml"]
		}
		if !subset(svc.Spec.Selector, labels) {
			t.Errorf("mode %s: the metrics Service selects %v, the pods are labelled %v", mode, svc.Spec.Selector, labels)
		}
		found := false
		for _, p := range hp.Ports {
			found = found || (p.Name == svc.Spec.Ports[0].TargetPort.StrVal && p.ContainerPort == 9090)
		}
		if !found {
			t.Errorf("mode %s: hookpace ports %v lack the Service's target %s on 9090", mode, hp.Ports, svc.Spec.Ports[0].TargetPort.StrVal)
		}
		tokenVolume := "admin-token"
		if mode == "sidecar" {
			tokenVolume = "hookpace-admin-token"
		}
		checkMount(t, hp, tokenVolume, "/etc/hookpace-admin")
		if v := volume(t, pod.Volumes, tokenVolume); v.Secret == nil || v.Secret.SecretName != "rel-hookpace-admin" {
			t.Errorf("mode %s: admin-token volume %s", mode, sprint(v))
		}
		if tok := get(t, r.secrets, "rel-hookpace-admin"); len(tok.Data["token"]) < 32 {
			t.Errorf("mode %s: admin token of %d bytes", mode, len(tok.Data["token"]))
		}
		// hookpace reads the token file when it loads the config: point it
		// at a stand-in for the mounted Secret.
		const mounted = "/etc/hookpace-admin/token"
		tokenFile := filepath.Join(t.TempDir(), "token")
		os.WriteFile(tokenFile, []byte("0123456789abcdef0123456789abcdef\n"), 0o600)
		if !strings.Contains(cfg, "token_file: "+mounted) {
			t.Errorf("mode %s: config without token_file %s:\n%s", mode, mounted, cfg)
		}
		c := hookpaceConfig(t, strings.ReplaceAll(cfg, mounted, tokenFile))
		if c.Admin != "0.0.0.0:9090" || c.AdminAccess.TokenFile != tokenFile {
			t.Errorf("mode %s: admin %q, access %s", mode, c.Admin, sprint(c.AdminAccess))
		}
	}
	// Without it the admin API stays on the pod's localhost.
	c := hookpaceConfig(t, get(t, render(t).configMaps, "hookpace").Data["config.yaml"])
	if c.Admin != "127.0.0.1:9090" {
		t.Errorf("admin %q without a ServiceMonitor", c.Admin)
	}
}

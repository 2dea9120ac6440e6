package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

const injectCaptureManifests = `apiVersion: v1
kind: ConfigMap
metadata: {name: hookpace}
data:
  config.yaml: |
    listen: 127.0.0.1:8080
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: billing}
spec:
  selector:
    matchLabels: {app: billing}
  template:
    metadata:
      labels: {app: billing}
    spec:
      containers:
        - name: app
          image: registry.example.com/billing:3
          env:
            - {name: JAVA_TOOL_OPTIONS, value: -XX:MaxRAMPercentage=75}
`

// TestInjectCaptureRuns runs what `hookpace inject --capture --java`
// writes, as a pod would, in a network namespace of its own: the init
// container's command as root, then hookpace with the ConfigMap's config
// (capture.listen as inject set it) as the sidecar's uid, then curl and
// Java's HttpClient as another uid with the app container's environment
// alone (the trust variables and JAVA_TOOL_OPTIONS, the trust directory
// where the pod mounts it). Both webhooks get 202 with an id and arrive
// once with it; Java kept the container's own -XX flag; hookpace's
// deliveries pass the rules' uid exception; a Service address in
// --service-cidr is reached directly, not through hookpace.
func TestInjectCaptureRuns(t *testing.T) {
	t.Parallel()
	ns := newNetns(t, "partner.test")
	base, partnerCA := tlsPartner(t, "partner.test")
	partner := nsReceiver(t, ns, "203.0.113.10:443", base)
	if out, err := ns.exec("ip", "addr", "add", "10.96.0.10/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("a Service address: %v\n%s", err, out)
	}
	service := nsReceiver(t, ns, "10.96.0.10:80", nil)

	pub := publicDir(t)
	in := filepath.Join(pub, "in.yaml")
	if err := os.WriteFile(in, []byte(injectCaptureManifests), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	inj := exec.Command(binary, "inject", "--capture", "--java", "--service-cidr", "10.96.0.0/12", "-f", in)
	inj.Stdout, inj.Stderr = &stdout, &stderr
	if err := inj.Run(); err != nil {
		t.Fatalf("hookpace inject: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "NET_ADMIN and NET_RAW") {
		t.Errorf("inject did not say what the init container needs:\n%s", stderr.String())
	}
	var cm corev1.ConfigMap
	var d appsv1.Deployment
	for _, doc := range strings.Split(stdout.String(), "\n---\n") {
		dst := any(&d)
		if strings.Contains(doc, "kind: ConfigMap") {
			dst = &cm
		}
		if err := sigsyaml.UnmarshalStrict([]byte(doc), dst); err != nil {
			t.Fatalf("inject's output does not decode strictly: %v\n%s", err, doc)
		}
	}
	spec := d.Spec.Template.Spec
	if len(spec.InitContainers) != 2 || len(spec.Containers) != 1 {
		t.Fatalf("init containers %d, containers %d:\n%s", len(spec.InitContainers), len(spec.Containers), stdout.String())
	}
	rules, sidecar, app := spec.InitContainers[0], spec.InitContainers[1], spec.Containers[0]
	uid, gid := *sidecar.SecurityContext.RunAsUser, *sidecar.SecurityContext.RunAsGroup

	// The pod's init container, as root in the pod's network namespace.
	if len(rules.Command) != 1 || rules.Command[0] != "/usr/local/bin/hookpace" {
		t.Fatalf("%s: command %v", rules.Name, rules.Command)
	}
	if out, err := ns.exec(binary, rules.Args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: hookpace %v: %v\n%s", rules.Name, rules.Args, err, out)
	}

	// The sidecar: the ConfigMap's config with the test partner's needs,
	// as its uid, the trust directory where the app's mount shows it.
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &cfg); err != nil {
		t.Fatal(err)
	}
	trust := filepath.Join(pub, "trust")
	hpDir := filepath.Join(pub, "hookpace")
	for _, d := range []string{trust, hpDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, int(uid), int(gid)); err != nil {
			t.Fatal(err)
		}
	}
	cfg["egress"] = map[string]any{"allow": []string{"203.0.113.10"}}
	cfg["tls"] = map[string]any{"ca_file": partnerCA}
	cfg["mitm"] = map[string]any{"public_dir": trust}
	cfg["hosts"] = map[string]any{"partner.test": map[string]any{"rate": "20/s", "burst": 5}}
	text, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(pub, "hookpace-bin")
	if err := copyExecutable(binary, bin); err != nil {
		t.Fatal(err)
	}
	hp := &Hookpace{t: t, Dir: hpDir, prefix: []string{"ip", "netns", "exec", ns.name, "setpriv", "--pdeathsig", "keep", // dies with the test after its uid changes
		"--reuid", strconv.FormatInt(uid, 10), "--regid", strconv.FormatInt(gid, 10), "--clear-groups", "--",
		"sh", "-c", `shift; exec "$0" "$@"`, bin}}
	hp.Config = filepath.Join(hpDir, "hookpace.yaml")
	writeConfig(t, hp.Config, "127.0.0.1:0", "127.0.0.1:0", filepath.Join(hpDir, "spool"), string(text))
	hp.start()
	t.Cleanup(hp.Kill)
	Poll(t, 30*time.Second, "the trust store", func() bool {
		_, err := os.Stat(filepath.Join(trust, "truststore.p12"))
		return err == nil
	})

	// The app container's environment, its trust mount where it is here.
	env := []string{"HOME=" + pub}
	for _, e := range app.Env {
		env = append(env, e.Name+"="+strings.ReplaceAll(e.Value, "/var/run/hookpace/trust", trust))
	}
	curl := ns.asNobody("curl", "-sS", "-o", "/dev/null", "-X", "POST", "-d", `{"via":"curl"}`,
		"-w", "%{http_code} %header{x-hookpace-id}\n", "https://partner.test/curl")
	curl.Env = appEnv(env...)
	out, err := curl.CombinedOutput()
	ids := sent(t, "curl", out, err, 1)
	javaSrc := filepath.Join(pub, "CaptureSender.java")
	if err := os.WriteFile(javaSrc, []byte(captureJava), 0o644); err != nil {
		t.Fatal(err)
	}
	java := ns.asNobody("java", javaSrc, "https://partner.test/java")
	java.Env = appEnv(env...)
	out, err = java.CombinedOutput()
	ids = append(ids, sent(t, "Java HttpClient", out, err, 1)...)
	if picked := grepLines(string(out), "Picked up JAVA_TOOL_OPTIONS"); !strings.Contains(picked, "-XX:MaxRAMPercentage=75 -Djavax.net.ssl.trustStore="+trust) ||
		strings.Contains(picked, "proxyHost") {
		t.Errorf("Java's options: %q, want the container's flag, then the trust store alone", picked)
	}

	partner.WaitFor(t, 30*time.Second, "both webhooks", func(as []Arrival) bool { return len(as) >= len(ids) })
	got := map[string]int{}
	for _, a := range partner.Arrivals() {
		got[a.Header.Get("X-Hookpace-Id")]++
	}
	if len(got) != 2 || got[ids[0]] != 1 || got[ids[1]] != 1 {
		t.Errorf("arrivals by X-Hookpace-Id %v, want %v once each", got, ids)
	}
	if own, _ := redirected(t, ns, "iptables", int(uid)); own < 2 {
		t.Errorf("%d of hookpace's connections (uid %d) passed the uid rule, want one a delivery", own, uid)
	}

	// A Service address (in --service-cidr) is not captured: the app gets
	// the Service's own answer.
	svc := ns.asNobody("curl", "-sS", "-o", "/dev/null", "-X", "POST", "-d", "{}", "-w", "%{http_code} %header{x-hookpace-id}", "http://10.96.0.10/svc")
	svc.Env = appEnv(env...)
	if out, err := svc.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "200" {
		t.Errorf("a Service call: %v %q, want the Service's own 200 and no X-Hookpace-Id", err, out)
	}
	if as := service.Arrivals(); len(as) != 1 || as[0].Header.Get("X-Hookpace-Id") != "" {
		t.Errorf("the Service got %d calls (%v), want one straight from the app", len(as), as)
	}
}

// copyExecutable copies the binary at from to to, mode 0755.
func copyExecutable(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}

package inject

import (
	"os"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// deployment is a one-container Deployment with spec (indented under the
// pod spec) added; replicas 1.
func deployment(podSpec string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
` + podSpec
}

const appContainer = `      containers:
        - name: app
          image: registry.example.com/web:1
`

// TestRefuses: an object with something of inject's names that inject did
// not put there is refused, with a message naming the object, the
// container and the variable; nothing is written, not even the objects
// that were fine.
func TestRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input string
		opts  func(*Options)
		want  []string
	}{
		{"proxy variable", deployment(`      containers:
        - name: app
          image: registry.example.com/web:1
          env:
            - {name: HTTPS_PROXY, value: "http://squid.corp:3128"}
`), nil, []string{"Deployment/web", `container "app"`, "HTTPS_PROXY"}},
		{"NO_PROXY", deployment(`      containers:
        - name: app
          image: registry.example.com/web:1
          env:
            - {name: no_proxy, value: internal.corp}
`), nil, []string{`container "app"`, "no_proxy", "--no-proxy"}},
		{"trust variable", deployment(`      containers:
        - name: app
          image: registry.example.com/web:1
          env:
            - {name: SSL_CERT_FILE, value: /etc/corp/roots.pem}
`), nil, []string{`container "app"`, "SSL_CERT_FILE", "--no-trust=app"}},
		{"proxy variable on an init container with --init-containers", deployment(`      initContainers:
        - name: fetch
          image: curlimages/curl:8.10.1
          env:
            - {name: HTTP_PROXY, value: "http://squid.corp:3128"}
` + appContainer), func(o *Options) { o.InitContainers = true }, []string{`container "fetch"`, "HTTP_PROXY"}},
		{"container name", deployment(`      initContainers:
        - name: hookpace
          image: ghcr.io/hookpace/hookpace:0.0.9
` + appContainer), nil, []string{"Deployment/web", `container named "hookpace"`, Annotation}},
		{"volume name", deployment(appContainer + `      volumes:
        - name: hookpace-spool
          emptyDir: {}
`), nil, []string{"Deployment/web", `volume is named "hookpace-spool"`}},
		{"port", deployment(`      containers:
        - name: app
          image: registry.example.com/web:1
          ports:
            - containerPort: 8080
`), nil, []string{`container "app" declares port 8080`, "--proxy-port"}},
		{"merge key", deployment(`      containers:
        - <<: {image: registry.example.com/web:1}
          name: app
`), nil, []string{"Deployment/web", "merge key (<<) at line 30"}},
		{"hostNetwork", deployment("      hostNetwork: true\n" + appContainer), nil, []string{"hostNetwork", "127.0.0.1"}},
		{"no containers", deployment("      containers: []\n"), nil, []string{"Deployment/web: no containers"}},
		{"PVC shared by replicas", strings.Replace(deployment(appContainer), "spec:\n  selector", "spec:\n  replicas: 3\n  selector", 1),
			func(o *Options) { o.SpoolPVC = "spool" }, []string{"--spool-pvc spool: 3 pods would share one claim"}},
		{"PVC on a DaemonSet", string(readTestdata(t, "daemonset.yaml")), func(o *Options) { o.SpoolPVC = "spool" },
			[]string{"DaemonSet/node-reporter", "--spool-pvc spool"}},
		{"another format", strings.Replace(deployment(appContainer), "labels: {app: web}\n    spec", "labels: {app: web}\n      annotations: {hookpace.dev/injected: v0}\n    spec", 1),
			nil, []string{`injected in format "v0"`, "inject the original manifest"}},
		{"not YAML", "kind: [Deployment\n", nil, []string{"in.yaml: document 2"}},
		{"not an object", "- a\n- b\n", nil, []string{"in.yaml: document 2 is not a Kubernetes object"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Defaults()
			if tc.opts != nil {
				tc.opts(&o)
			}
			// A good object first: it is not written either.
			input := string(readTestdata(t, "pod.yaml")) + "---\n" + tc.input
			out, _, err := injectBytes(t, o, []byte(input))
			if err == nil {
				t.Fatalf("injected:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if len(out) != 0 {
				t.Errorf("wrote %d bytes after refusing", len(out))
			}
		})
	}
}

// TestKeepsWhatItDoesNotKnow: comments, key order and fields that
// k8s.io/api does not (yet) have survive, in workloads and other objects.
func TestKeepsWhatItDoesNotKnow(t *testing.T) {
	input := `# Owned by the payments team.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      containers:
        - image: registry.example.com/web:1   # pinned
          name: app
          futureField: {enabled: true}
  selector:
    matchLabels: {app: web}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w}
spec: {size: 3, color: blue}
`
	out, _, err := injectBytes(t, Defaults(), []byte(input))
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, w := range []string{"# Owned by the payments team.", "image: registry.example.com/web:1 # pinned", "futureField: {enabled: true}",
		"spec: {size: 3, color: blue}", "kind: Widget"} {
		if !strings.Contains(s, w) {
			t.Errorf("output lacks %q:\n%s", w, s)
		}
	}
	if strings.Index(s, "template:") > strings.Index(s, "selector:") || strings.Index(s, "- image:") > strings.Index(s, "  name: app") {
		t.Errorf("key order changed:\n%s", s)
	}
}

// TestFlags: the flags that add mounts, env and ports, and the options
// that are refused before any manifest is read.
func TestFlags(t *testing.T) {
	o := Defaults()
	o.HandoffSecret, o.AdminTokenSecret, o.RedisPasswordSecret = "gw-hookpace", "rel-hookpace-admin", "redis-auth:pw"
	o.ReadinessProbe, o.ProxyPort, o.AdminPort, o.SpoolDir = true, 3128, 19090, "/spool"
	o.ShutdownTimeout, o.AppStop, o.MemoryLimit, o.CPULimit, o.SpoolSize = 60e9, 0, "256Mi", "500m", ""
	out, _, err := injectBytes(t, o, readTestdata(t, "pod.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := decodeStrict(t, out)[0]
	hp := p.spec.InitContainers[0]
	if *p.spec.TerminationGracePeriodSeconds != 70 {
		t.Errorf("grace %d, want 60 + 10", *p.spec.TerminationGracePeriodSeconds)
	}
	if v, _ := envValue(p.spec.Containers[0], "HTTPS_PROXY"); v != "http://127.0.0.1:3128" {
		t.Errorf("HTTPS_PROXY %q", v)
	}
	if hp.ReadinessProbe == nil || !slices.Equal(hp.ReadinessProbe.Exec.Command, []string{binary, "health", "--ready", "--admin", "127.0.0.1:19090"}) {
		t.Errorf("readiness probe %+v", hp.ReadinessProbe)
	}
	if v, _ := envValue(hp, "GOMEMLIMIT"); v != "192MiB" {
		t.Errorf("GOMEMLIMIT %q, want 3/4 of 256Mi", v)
	}
	var redis *corev1.SecretKeySelector
	for _, e := range hp.Env {
		if e.Name == "HOOKPACE_REDIS_PASSWORD" && e.ValueFrom != nil {
			redis = e.ValueFrom.SecretKeyRef
		}
	}
	if redis == nil || redis.Name != "redis-auth" || redis.Key != "pw" {
		t.Errorf("HOOKPACE_REDIS_PASSWORD from %+v", redis)
	}
	if !slices.ContainsFunc(hp.Ports, func(p corev1.ContainerPort) bool { return p.Name == AdminPortName && p.ContainerPort == 19090 }) {
		t.Errorf("ports %+v", hp.Ports)
	}
	mounts := map[string]string{}
	for _, m := range hp.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	if mounts[HandoffVolume] != "/etc/hookpace-handoff" || mounts[TokenVolume] != "/etc/hookpace-admin" || mounts[SpoolVolume] != "/spool" {
		t.Errorf("mounts %v", mounts)
	}
	secrets := map[string]string{}
	for _, v := range p.spec.Volumes {
		if v.Secret != nil {
			secrets[v.Name] = v.Secret.SecretName + "/" + v.Secret.Items[0].Key
		}
		if v.Name == SpoolVolume && (v.EmptyDir == nil || v.EmptyDir.SizeLimit != nil) {
			t.Errorf("spool %+v, want an emptyDir without a limit", v)
		}
	}
	if secrets[HandoffVolume] != "gw-hookpace/handoff-credentials" || secrets[TokenVolume] != "rel-hookpace-admin/token" {
		t.Errorf("secret volumes %v", secrets)
	}

	for _, bad := range []func(*Options){
		func(o *Options) { o.ProxyPort = 0 },
		func(o *Options) { o.AdminPort = o.ProxyPort },
		func(o *Options) { o.MemoryLimit = "lots" },
		func(o *Options) { o.CIDRs = []string{"10.96.0.0"} },
		func(o *Options) { o.NoProxy = []string{"a.example b.example"} },
		func(o *Options) { o.SpoolDir = "data" },
		func(o *Options) { o.Image = "" },
	} {
		o := Defaults()
		bad(&o)
		if _, err := New(o); err == nil {
			t.Errorf("New accepted %+v", o)
		}
	}
}

// TestNoTrustForAll: --no-trust=* leaves every container without the trust
// variables and mount; a name no container has is reported.
func TestNoTrustForAll(t *testing.T) {
	o := Defaults()
	o.NoTrust = []string{"*", "wokrer"}
	out, log, err := injectBytes(t, o, readTestdata(t, "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range decodeStrict(t, out)[0].spec.Containers {
		if _, ok := envValue(c, "SSL_CERT_FILE"); ok || len(c.VolumeMounts) != 0 {
			t.Errorf("container %s: trust %+v %+v", c.Name, c.Env, c.VolumeMounts)
		}
	}
	if !strings.Contains(log, "--no-trust=wokrer: no container of that name") {
		t.Errorf("log: %s", log)
	}
}

// The default image is the one the chart names.
func TestDefaultImageIsTheChart(t *testing.T) {
	b, err := os.ReadFile("../charts/hookpace/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Hookpace struct {
			Image string `json:"image"`
		} `json:"hookpace"`
	}
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if v.Hookpace.Image != DefaultImage {
		t.Errorf("inject's default image %s, the chart's %s", DefaultImage, v.Hookpace.Image)
	}
}

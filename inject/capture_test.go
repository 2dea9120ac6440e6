package inject

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const javaApp = `apiVersion: v1
kind: ConfigMap
metadata: {name: hookpace}
data:
  config.yaml: |
    listen: 127.0.0.1:8080
    admin: 127.0.0.1:9090
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
      initContainers:
        - name: migrate
          image: registry.example.com/billing-migrate:3
      containers:
        - name: app
          image: registry.example.com/billing:3
          env:
            - {name: JAVA_TOOL_OPTIONS, value: -XX:MaxRAMPercentage=75}
        - name: reports
          image: registry.example.com/reports:3
          env:
            - name: JAVA_TOOL_OPTIONS
              valueFrom: {configMapKeyRef: {name: jvm, key: options}}
`

const trustStoreOpts = "-Djavax.net.ssl.trustStore=" + TrustDir + "/truststore.p12 -Djavax.net.ssl.trustStoreType=PKCS12 -Djavax.net.ssl.trustStorePassword=changeit"

// podOf is the decoded output's Deployment and ConfigMap.
func podOf(t *testing.T, out []byte) (*corev1.PodSpec, *corev1.ConfigMap) {
	t.Helper()
	var spec *corev1.PodSpec
	var cm *corev1.ConfigMap
	for _, o := range decodeStrict(t, out) {
		switch o.kind {
		case "Deployment":
			spec = o.spec
		case "ConfigMap":
			cm = o.obj.(*corev1.ConfigMap)
		}
	}
	if spec == nil || cm == nil {
		t.Fatalf("no Deployment or ConfigMap in the output:\n%s", out)
	}
	return spec, cm
}

func container(t *testing.T, cs []corev1.Container, name string) corev1.Container {
	t.Helper()
	i := slices.IndexFunc(cs, func(c corev1.Container) bool { return c.Name == name })
	if i < 0 {
		t.Fatalf("no container %q", name)
	}
	return cs[i]
}

// TestJavaKeepsItsOptions: --java on a container that sets
// JAVA_TOOL_OPTIONS itself keeps its flag first and appends hookpace's;
// one whose JAVA_TOOL_OPTIONS comes from a ConfigMap keeps it under
// another name that the new value references. With --capture Java gets
// the trust store only.
func TestJavaKeepsItsOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		capture bool
		ours    string
	}{
		{"proxy", false, "-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=8080 -Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=8080 -Dhttp.nonProxyHosts=localhost|127.0.0.1|::1|*.svc|*.svc.cluster.local|*.cluster.local|169.254.169.254|metadata.google.internal " + trustStoreOpts},
		{"capture", true, trustStoreOpts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Defaults()
			o.Java = true
			o.Capture = tc.capture
			o.CIDRs = []string{"10.96.0.0/12"}
			if !tc.capture {
				o.CIDRs = nil
			}
			out, log, err := injectBytes(t, o, []byte(javaApp))
			if err != nil {
				t.Fatalf("%v\n%s", err, log)
			}
			spec, _ := podOf(t, out)
			app := container(t, spec.Containers, "app")
			if v, _ := envValue(app, "JAVA_TOOL_OPTIONS"); v != "-XX:MaxRAMPercentage=75 "+tc.ours {
				t.Errorf("app: JAVA_TOOL_OPTIONS=%q, want the app's flag then %q", v, tc.ours)
			}
			if n := slices.IndexFunc(app.Env, func(e corev1.EnvVar) bool { return e.Name == "JAVA_TOOL_OPTIONS" }); n != 0 ||
				slices.ContainsFunc(app.Env[1:], func(e corev1.EnvVar) bool { return e.Name == "JAVA_TOOL_OPTIONS" }) {
				t.Errorf("app: JAVA_TOOL_OPTIONS not once, in its place: %+v", app.Env)
			}
			rep := container(t, spec.Containers, "reports")
			if rep.Env[0].Name != JavaOriginalVar || rep.Env[0].ValueFrom == nil || rep.Env[0].ValueFrom.ConfigMapKeyRef.Key != "options" {
				t.Errorf("reports: its own JAVA_TOOL_OPTIONS is not kept as %s: %+v", JavaOriginalVar, rep.Env[0])
			}
			if v, _ := envValue(rep, "JAVA_TOOL_OPTIONS"); v != "$("+JavaOriginalVar+") "+tc.ours {
				t.Errorf("reports: JAVA_TOOL_OPTIONS=%q", v)
			}
			if !strings.Contains(log, "JAVA_TOOL_OPTIONS kept, hookpace's options appended, on app, reports") {
				t.Errorf("the log does not say the options were kept:\n%s", log)
			}
			again, _, err := injectBytes(t, o, out)
			if err != nil || string(again) != string(out) {
				t.Errorf("injecting the output again changed it (%v)", err)
			}
			// An upgrade changes the image only; uninject gives back the
			// app's own JAVA_TOOL_OPTIONS (the literal and the valueFrom)
			// and takes the capture init container out.
			up := o
			up.Image = "reg/hookpace:9.9.9"
			upgraded, log, err := injectBytes(t, up, out)
			if err != nil {
				t.Fatalf("%v\n%s", err, log)
			}
			if want := strings.ReplaceAll(string(out), "image: "+o.Image, "image: "+up.Image); string(upgraded) != want {
				t.Errorf("the upgrade changed more than the image:\n%s", upgraded)
			}
			for name, injected := range map[string][]byte{"injected": out, "upgraded": upgraded} {
				back, log, err := uninjectBytes(t, injected)
				if err != nil {
					t.Fatalf("uninject %s: %v\n%s", name, err, log)
				}
				// ConfigMaps are left as inject made them (capture.listen).
				if got, want := workloads(generic(t, back)), workloads(generic(t, []byte(javaApp))); !reflect.DeepEqual(got, want) {
					t.Errorf("uninject of %s gives:\n%s\nwant the objects of:\n%s", name, back, javaApp)
				}
			}
		})
	}
}

// TestCapture: --capture puts the init container that applies the rules
// before hookpace's sidecar, with exactly the arguments and capabilities
// it needs; hookpace runs as its own uid; app containers get the trust
// variables and no proxy variable (both with --proxy-env); the ConfigMap
// gets capture.listen; the log says what the init container needs.
func TestCapture(t *testing.T) {
	o := Defaults()
	o.Capture = true
	o.CIDRs = []string{"10.96.0.0/12", "10.244.0.0/16"}
	o.NoProxy = []string{"payments.internal", "192.168.7.0/24", "fd00::5"}
	out, log, err := injectBytes(t, o, []byte(javaApp))
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	spec, cm := podOf(t, out)
	names := make([]string, len(spec.InitContainers))
	for i, c := range spec.InitContainers {
		names[i] = c.Name
	}
	if !slices.Equal(names, []string{CaptureContainerName, ContainerName, "migrate"}) {
		t.Fatalf("init containers %v: want the rules, then hookpace, then the app's", names)
	}
	ci := spec.InitContainers[0]
	want := []string{"capture", "rules", "--apply", "--to", "15001", "--exclude-uid", "15532", "--ports", "80,443", "--reject-quic",
		"--exclude-cidr", "169.254.169.254/32", "--exclude-cidr", "10.96.0.0/12", "--exclude-cidr", "10.244.0.0/16",
		"--exclude-cidr", "192.168.7.0/24", "--exclude-cidr", "fd00::5/128"}
	if ci.Image != DefaultCaptureImage || !slices.Equal(ci.Command, []string{binary}) || !slices.Equal(ci.Args, want) || ci.RestartPolicy != nil {
		t.Errorf("%s: image %s command %v args %v restartPolicy %v\nwant args %v", ci.Name, ci.Image, ci.Command, ci.Args, ci.RestartPolicy, want)
	}
	sc := ci.SecurityContext
	if sc == nil || *sc.RunAsUser != 0 || *sc.AllowPrivilegeEscalation || *sc.Privileged ||
		!slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_ADMIN", "NET_RAW"}) || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("%s: securityContext %+v", ci.Name, sc)
	}
	hp := spec.InitContainers[1]
	if u := hp.SecurityContext.RunAsUser; u == nil || *u != DefaultCaptureUID || hp.SecurityContext.Capabilities.Add != nil {
		t.Errorf("hookpace runs as %v, want its own uid %d (excluded from the rules) and no capability", u, DefaultCaptureUID)
	}
	for _, c := range append(slices.Clone(spec.Containers), spec.InitContainers[2:]...) {
		for _, v := range []string{"HTTP_PROXY", "https_proxy", "NO_PROXY"} {
			if _, ok := envValue(c, v); ok {
				t.Errorf("%s: %s set with --capture", c.Name, v)
			}
		}
		if c.Name == "migrate" {
			continue // not a target without --init-containers
		}
		for _, v := range trustVars {
			if got, _ := envValue(c, v); got != TrustDir+"/bundle.pem" {
				t.Errorf("%s: %s=%q", c.Name, v, got)
			}
		}
		// Java's HTTPS is intercepted too: the trust store without --java,
		// and no proxy properties (capture needs none).
		if java, _ := envValue(c, "JAVA_TOOL_OPTIONS"); !strings.Contains(java, "-Djavax.net.ssl.trustStore="+TrustDir+"/truststore.p12") ||
			strings.Contains(java, "proxyHost") {
			t.Errorf("%s: JAVA_TOOL_OPTIONS=%q, want the trust store alone", c.Name, java)
		}
	}
	var cfg struct {
		Listen, Admin string
		Capture       struct{ Listen string }
	}
	if err := yaml.UnmarshalStrict([]byte(cm.Data["config.yaml"]), &cfg); err != nil || cfg.Capture.Listen != ":15001" || cfg.Listen != "127.0.0.1:8080" {
		t.Errorf("the ConfigMap's config.yaml (%v):\n%s", err, cm.Data["config.yaml"])
	}
	for _, w := range []string{"NET_ADMIN and NET_RAW", "pod-security.kubernetes.io/enforce=privileged", `set capture.listen: ":15001" in the ConfigMap "hookpace"`,
		"payments.internal (--no-proxy) are captured", "hookpace runs as uid 15532", "trust variables on app, reports"} {
		if !strings.Contains(log, w) {
			t.Errorf("the log lacks %q:\n%s", w, log)
		}
	}
	again, log2, err := injectBytes(t, o, out)
	if err != nil || string(again) != string(out) {
		t.Errorf("injecting the output again changed it (%v):\n%s", err, log2)
	}

	o.ProxyEnv = true
	out, log, err = injectBytes(t, o, []byte(javaApp))
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	spec, _ = podOf(t, out)
	if v, _ := envValue(spec.Containers[0], "HTTPS_PROXY"); v != "http://127.0.0.1:8080" {
		t.Errorf("--proxy-env: HTTPS_PROXY=%q", v)
	}
}

// TestCaptureRefuses: what --capture cannot work with.
func TestCaptureRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input string
		opts  func(*Options)
		want  string
	}{
		{"no service range", javaApp, func(o *Options) { o.CIDRs = nil }, "--capture: give the cluster's --service-cidr"},
		{"an app as hookpace's uid", strings.Replace(javaApp, "    spec:\n", "    spec:\n      securityContext: {runAsUser: 15532}\n", 1), nil,
			`container "app" runs as uid 15532, hookpace's with --capture`},
		{"capture.listen elsewhere", strings.Replace(javaApp, "admin: 127.0.0.1:9090", "admin: 127.0.0.1:9090\n    capture: {listen: \"127.0.0.1:15006\"}", 1), nil,
			`capture.listen is "127.0.0.1:15006": pass its port as --capture-port`},
		{"capture port among the ports", javaApp, func(o *Options) { o.CaptureOptions.Ports = []int{80, 15001} }, "--capture-ports: 15001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Defaults()
			o.Capture = true
			o.CIDRs = []string{"10.96.0.0/12"}
			if tc.opts != nil {
				tc.opts(&o)
			}
			in, err := New(o)
			if err == nil {
				var ob, lb strings.Builder
				err = in.Inject(&ob, &lb, Input{Name: "in.yaml", R: strings.NewReader(tc.input)})
				if ob.Len() != 0 {
					t.Errorf("wrote %d bytes after refusing", ob.Len())
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// workloads are the objects of docs that are not ConfigMaps.
func workloads(docs []any) []any {
	var out []any
	for _, d := range docs {
		if m, ok := d.(map[string]any); ok && m["kind"] == "ConfigMap" {
			continue
		}
		out = append(out, d)
	}
	return out
}

// A ConfigMap whose hosts name a partner on a port --capture-ports
// leaves alone is warned of, with the flag that covers it.
func TestCaptureWarnsOfUncoveredPorts(t *testing.T) {
	o := Defaults()
	o.Capture = true
	o.CIDRs = []string{"10.96.0.0/12"}
	in := strings.Replace(javaApp, "    admin: 127.0.0.1:9090\n",
		"    admin: 127.0.0.1:9090\n    hosts:\n      \"hooks.other.example:8443\": {rate: 5/s}\n      \"a.example:443\": {rate: 5/s}\n      \"b.example\": {rate: 5/s}\n", 1)
	_, log, err := injectBytes(t, o, []byte(in))
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if !strings.Contains(log, `the ConfigMap "hookpace" names partners on port(s) 8443`) || !strings.Contains(log, "pass --capture-ports 80,443,8443") {
		t.Errorf("no warning of the partner on 8443:\n%s", log)
	}
	o.CaptureOptions.Ports = []int{80, 443, 8443}
	if _, log, _ := injectBytes(t, o, []byte(in)); strings.Contains(log, "names partners on port(s)") {
		t.Errorf("warned with 8443 captured:\n%s", log)
	}
}

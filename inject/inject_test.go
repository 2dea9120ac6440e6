package inject

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestInjectManifests: every kind, with and without env, volumes, init
// containers and a sidecar of its own, in Lists and streams. Each output
// decodes strictly; each pod template has hookpace first among its init
// containers and the variables on each app container; with hookpace's
// additions taken out each object equals its input; and the output
// injected again is the same bytes.
func TestInjectManifests(t *testing.T) {
	for _, tc := range []struct {
		file     string
		opts     func(*Options)
		injected []string // kind/name of each workload
		notTrust []string // containers without the trust variables
	}{
		{file: "deployment.yaml", injected: []string{"Deployment/web"}},
		{file: "statefulset.yaml", injected: []string{"StatefulSet/ledger"}},
		{file: "daemonset.yaml", injected: []string{"DaemonSet/node-reporter"}},
		{file: "job.yaml", injected: []string{"Job/backfill"}, opts: func(o *Options) { o.AcceptLoss = true }},
		{file: "cronjob.yaml", injected: []string{"CronJob/nightly-invoices"}, opts: func(o *Options) { o.HandoffSecret = "handoff" }},
		{file: "pod.yaml", injected: []string{"Pod/debug"}},
		{file: "list.yaml", injected: []string{"Deployment/web", "CronJob/cleanup"}, opts: func(o *Options) { o.AcceptLoss = true }},
		{file: "stream.yaml", injected: []string{"Deployment/mailer"}},
		{file: "deployment.json", injected: []string{"Deployment/exported"}},
		{file: "anchors.yaml", injected: []string{"Deployment/twins"}},
		{file: "deployment.yaml", injected: []string{"Deployment/web"}, notTrust: []string{"worker"},
			opts: func(o *Options) { o.NoTrust = []string{"worker"} }},
		{file: "job.yaml", injected: []string{"Job/backfill"}, opts: func(o *Options) { o.InitContainers, o.AcceptLoss = true, true }},
		{file: "statefulset.yaml", injected: []string{"StatefulSet/ledger"}, opts: func(o *Options) {
			o.SpoolPVC, o.Java, o.CIDRs, o.NoProxy = "ledger-spool", true, []string{"10.96.0.0/12"}, []string{"ledger-db"}
		}},
	} {
		name := tc.file
		if tc.opts != nil {
			name += "+flags"
		}
		t.Run(name, func(t *testing.T) {
			o := Defaults()
			if tc.opts != nil {
				tc.opts(&o)
			}
			input := readTestdata(t, tc.file)
			out, log, err := injectBytes(t, o, input)
			if err != nil {
				t.Fatalf("%v\n%s", err, log)
			}
			before, after := decodeStrict(t, input), decodeStrict(t, out)
			if len(before) != len(after) {
				t.Fatalf("%d objects in, %d out", len(before), len(after))
			}
			var injected []string
			for i, a := range after {
				b := before[i]
				if a.kind != b.kind || a.name != b.name {
					t.Fatalf("object %d: %s/%s in, %s/%s out", i, b.kind, b.name, a.kind, a.name)
				}
				if a.spec != nil {
					injected = append(injected, a.kind+"/"+a.name)
					checkInjected(t, a, b, o, tc.notTrust)
					strip(a, b)
				}
				if !equality.Semantic.DeepEqual(a.obj, b.obj) {
					t.Errorf("%s/%s: beyond hookpace's additions, the object changed:\nin  %+v\nout %+v", a.kind, a.name, b.obj, a.obj)
				}
			}
			if !slices.Equal(injected, tc.injected) {
				t.Errorf("injected %v, want %v", injected, tc.injected)
			}
			again, log2, err := injectBytes(t, o, out)
			if err != nil || !bytes.Equal(again, out) {
				t.Errorf("injecting the output again: %v\n%s\nfirst:\n%s\nsecond:\n%s", err, log2, out, again)
			}
			if !strings.Contains(log2, "already injected") {
				t.Errorf("the second pass does not say it found its own output:\n%s", log2)
			}
		})
	}
}

// checkInjected checks one injected pod template against its input.
func checkInjected(t *testing.T, a, b object, o Options, notTrust []string) {
	t.Helper()
	who := a.kind + "/" + a.name
	spec := a.spec
	if a.meta.Annotations[Annotation] != Format {
		t.Errorf("%s: annotations %v", who, a.meta.Annotations)
	}
	if len(spec.InitContainers) != len(b.spec.InitContainers)+1 {
		t.Fatalf("%s: %d init containers, had %d", who, len(spec.InitContainers), len(b.spec.InitContainers))
	}
	hp := spec.InitContainers[0]
	if hp.Name != ContainerName || hp.RestartPolicy == nil || *hp.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("%s: first init container %q, restartPolicy %v: want hookpace as a native sidecar", who, hp.Name, hp.RestartPolicy)
	}
	if hp.Image != o.Image || !slices.Equal(hp.Args, []string{"run", "--config", "/etc/hookpace/config.yaml"}) {
		t.Errorf("%s: hookpace image %q args %v", who, hp.Image, hp.Args)
	}
	for _, p := range []*corev1.Probe{hp.StartupProbe, hp.LivenessProbe} {
		if p == nil || p.Exec == nil || !slices.Equal(p.Exec.Command, []string{binary, "health", "--admin", fmt.Sprintf("127.0.0.1:%d", o.AdminPort)}) {
			t.Errorf("%s: probe %+v", who, p)
		}
	}
	sc := hp.SecurityContext
	if sc == nil || !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: securityContext %+v", who, sc)
	}
	if q := hp.Resources.Limits[corev1.ResourceMemory]; q.Cmp(resource.MustParse(o.MemoryLimit)) != 0 {
		t.Errorf("%s: memory limit %v", who, hp.Resources.Limits)
	}
	if v, _ := envValue(hp, "HTTP_PROXY"); v != "" {
		t.Errorf("%s: hookpace itself has HTTP_PROXY %q: it would send to itself", who, v)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range hp.VolumeMounts {
		mounts[m.Name] = m
	}
	if mounts[ConfigVolume].MountPath != "/etc/hookpace" || mounts[ConfigVolume].SubPath != "" || mounts[SpoolVolume].MountPath != o.SpoolDir {
		t.Errorf("%s: hookpace mounts %+v", who, hp.VolumeMounts)
	}
	for i, c := range b.spec.InitContainers {
		if spec.InitContainers[i+1].Name != c.Name {
			t.Errorf("%s: init container %d is %q, was %q", who, i+1, spec.InitContainers[i+1].Name, c.Name)
		}
	}
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	if cm := vols[ConfigVolume].ConfigMap; cm == nil || cm.Name != o.ConfigMap || len(cm.Items) != 0 {
		t.Errorf("%s: config volume %+v", who, vols[ConfigVolume])
	}
	spool := vols[SpoolVolume]
	if o.SpoolPVC == "" && (spool.EmptyDir == nil || spool.EmptyDir.SizeLimit.String() != o.SpoolSize) ||
		o.SpoolPVC != "" && (spool.PersistentVolumeClaim == nil || spool.PersistentVolumeClaim.ClaimName != o.SpoolPVC ||
			spec.SecurityContext == nil || spec.SecurityContext.FSGroup == nil) {
		t.Errorf("%s: spool volume %+v, pod securityContext %+v", who, spool, spec.SecurityContext)
	}
	want := int64(50)
	if g := b.spec.TerminationGracePeriodSeconds; g != nil && *g > want {
		want = *g
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g != want {
		t.Errorf("%s: terminationGracePeriodSeconds %v, want %d", who, g, want)
	}

	apps := spec.Containers
	if o.InitContainers {
		apps = append(slices.Clone(apps), spec.InitContainers[1:]...)
	}
	proxy := fmt.Sprintf("http://127.0.0.1:%d", o.ProxyPort)
	for _, c := range apps {
		seen := map[string]bool{}
		for _, e := range c.Env {
			if seen[e.Name] {
				t.Errorf("%s: container %s has %s twice", who, c.Name, e.Name)
			}
			seen[e.Name] = true
		}
		for _, v := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
			if got, _ := envValue(c, v); got != proxy {
				t.Errorf("%s: container %s: %s=%q, want %s", who, c.Name, v, got, proxy)
			}
		}
		for _, v := range []string{"NO_PROXY", "no_proxy"} {
			got, _ := envValue(c, v)
			for _, h := range append(o.noProxy(), ".svc", ".cluster.local", "localhost") {
				if !hasListItem(got, h) {
					t.Errorf("%s: container %s: %s=%q lacks %s", who, c.Name, v, got, h)
				}
			}
		}
		trust := !slices.Contains(notTrust, c.Name)
		bundle, _ := envValue(c, "SSL_CERT_FILE")
		if trust != (bundle == TrustDir+"/bundle.pem") {
			t.Errorf("%s: container %s: SSL_CERT_FILE=%q, trust %v", who, c.Name, bundle, trust)
		}
		if ca, _ := envValue(c, "NODE_EXTRA_CA_CERTS"); trust != (ca == TrustDir+"/bundle.pem") {
			t.Errorf("%s: container %s: NODE_EXTRA_CA_CERTS=%q, trust %v", who, c.Name, ca, trust)
		}
		// PHP's scan directory: the image's own first (the empty entry), then
		// the trust directory's php/, where hookpace writes its ini file.
		if dirs, _ := envValue(c, "PHP_INI_SCAN_DIR"); trust != (dirs == ":"+TrustDir+"/php") {
			t.Errorf("%s: container %s: PHP_INI_SCAN_DIR=%q, trust %v", who, c.Name, dirs, trust)
		}
		mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == SpoolVolume && m.MountPath == TrustDir && m.SubPath == "trust" && m.ReadOnly
		})
		if mounted != trust {
			t.Errorf("%s: container %s: trust directory mounted %v, want %v (%+v)", who, c.Name, mounted, trust, c.VolumeMounts)
		}
		java, ok := envValue(c, "JAVA_TOOL_OPTIONS")
		if ok != o.Java || o.Java && (!strings.Contains(java, fmt.Sprintf("-Dhttps.proxyPort=%d", o.ProxyPort)) ||
			!strings.Contains(java, "-Dhttp.nonProxyHosts=localhost|127.0.0.1|::1|*.svc|") ||
			strings.Contains(java, "/12") || !strings.Contains(java, "-Djavax.net.ssl.trustStoreType=PKCS12")) {
			t.Errorf("%s: container %s: JAVA_TOOL_OPTIONS=%q", who, c.Name, java)
		}
	}
}

// strip takes hookpace's additions out of a, so that it can be compared
// with its input b.
func strip(a, b object) {
	spec := a.spec
	spec.InitContainers = slices.DeleteFunc(spec.InitContainers, func(c corev1.Container) bool { return c.Name == ContainerName })
	spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool { return strings.HasPrefix(v.Name, "hookpace-") })
	ours := append(slices.Clone(trustVars), "HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "JAVA_TOOL_OPTIONS", "PHP_INI_SCAN_DIR")
	for _, cs := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
		for i := range cs {
			cs[i].Env = slices.DeleteFunc(cs[i].Env, func(e corev1.EnvVar) bool { return slices.Contains(ours, e.Name) })
			cs[i].VolumeMounts = slices.DeleteFunc(cs[i].VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == TrustDir })
		}
	}
	delete(a.meta.Annotations, Annotation)
	delete(a.meta.Annotations, PartsAnnotation)
	spec.TerminationGracePeriodSeconds = b.spec.TerminationGracePeriodSeconds
	if spec.SecurityContext != nil && (b.spec.SecurityContext == nil || b.spec.SecurityContext.FSGroup == nil) {
		spec.SecurityContext.FSGroup = nil
		if equality.Semantic.DeepEqual(*spec.SecurityContext, corev1.PodSecurityContext{}) {
			spec.SecurityContext = nil
		}
	}
}

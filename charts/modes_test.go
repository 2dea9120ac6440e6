package charts

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/hookpace/hookpace/inject"
)

// TestSidecar: sidecar mode renders the config and nothing that runs;
// the command its NOTES.txt prints turns a team's Deployment into one
// with hookpace as a native sidecar reading that ConfigMap, and inject's
// defaults agree with the config the chart renders.
func TestSidecar(t *testing.T) {
	r := render(t) // the default mode
	if n := len(r.deployments) + len(r.statefulSets) + len(r.services) + len(r.pdbs) + len(r.secrets); n != 0 || len(r.configMaps) != 1 {
		t.Errorf("sidecar mode rendered more than its ConfigMap: %v %v %v %v %v", r.deployments, r.statefulSets, r.services, r.pdbs, r.secrets)
	}
	cm := get(t, r.configMaps, "hookpace")
	c := hookpaceConfig(t, cm.Data["config.yaml"])
	if c.Shutdown.Timeout.D() != 30*time.Second || c.Shutdown.Drain.D() != 20*time.Second || c.Shutdown.Handoff != "" { // the default drain: timeout less 10 s
		t.Errorf("shutdown = %+v", c.Shutdown)
	}
	if c.Listen != "127.0.0.1:8080" || c.Spool.Dir != "/var/lib/hookpace" {
		t.Errorf("listen %q, spool.dir %q", c.Listen, c.Spool.Dir)
	}
	o := inject.Defaults()
	if o.ConfigMap != cm.Name || c.Listen != fmt.Sprintf("127.0.0.1:%d", o.ProxyPort) || c.Admin != fmt.Sprintf("127.0.0.1:%d", o.AdminPort) ||
		c.Spool.Dir != o.SpoolDir || c.Shutdown.Timeout.D() != o.ShutdownTimeout {
		t.Errorf("hookpace inject's defaults %+v differ from the chart's sidecar config:\n%s", o, cm.Data["config.yaml"])
	}
	if f := injectFlags(t); len(f) != 0 {
		t.Errorf("NOTES.txt gives inject flags %v for the defaults", f)
	}

	pod := injected(t).Spec.Template.Spec
	hp := pod.InitContainers[0]
	if hp.Name != "hookpace" || hp.RestartPolicy == nil || *hp.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("init containers %+v", pod.InitContainers)
	}
	checkExecProbe(t, "startup", hp.StartupProbe, "health")
	checkExecProbe(t, "liveness", hp.LivenessProbe, "health")
	// --app-stop 10 s + shutdown.timeoutSeconds 30 + 10 to close the spool.
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g != 50 {
		t.Errorf("terminationGracePeriodSeconds = %v, want 50", g)
	}
	if v := volume(t, pod.Volumes, "hookpace-config"); v.ConfigMap == nil || v.ConfigMap.Name != cm.Name {
		t.Errorf("config volume = %+v", v)
	}
	checkMount(t, hp, "hookpace-spool", c.Spool.Dir)
	checkMount(t, hp, "hookpace-config", "/etc/hookpace")
	if !slices.Contains(pod.Containers[0].Env, corev1.EnvVar{Name: "HTTP_PROXY", Value: "http://127.0.0.1:8080"}) {
		t.Errorf("app container: %+v", pod.Containers)
	}
}

func TestSidecarHandoffToGateway(t *testing.T) {
	sets := []string{"hookpace.shutdown.drainSeconds=20", "hookpace.shutdown.timeoutSeconds=40",
		"hookpace.shutdown.handoff=http://gw-hookpace.hooks.svc.cluster.local:8080", "hookpace.shutdown.handoffSecret=gw-hookpace"}
	r := render(t, sets...)
	c := hookpaceConfig(t, get(t, r.configMaps, "hookpace").Data["config.yaml"])
	if sh := c.Shutdown; sh.Timeout.D() != 40*time.Second || sh.Drain.D() != 20*time.Second ||
		sh.Handoff != "http://gw-hookpace.hooks.svc.cluster.local:8080" || sh.HandoffAuth != "/etc/hookpace-handoff/handoff-credentials" ||
		sh.HandoffSecret != "/etc/hookpace-handoff/handoff-secret" {
		t.Errorf("shutdown = %+v", sh)
	}
	pod := injected(t, sets...).Spec.Template.Spec
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g != 60 {
		t.Errorf("terminationGracePeriodSeconds = %v, want 10 + 40 + 10", g)
	}
	if v := volume(t, pod.Volumes, "hookpace-handoff"); v.Secret == nil || v.Secret.SecretName != "gw-hookpace" ||
		len(v.Secret.Items) != 2 || v.Secret.Items[0].Key != "handoff-credentials" || v.Secret.Items[1].Key != "handoff-secret" {
		t.Errorf("handoff volume = %+v", v)
	}
	// The file the config names is where inject mounts the Secret.
	checkMount(t, pod.InitContainers[0], "hookpace-handoff", path.Dir(c.Shutdown.HandoffAuth))
}

func TestGateway(t *testing.T) {
	r := render(t, "mode=gateway", "gateway.auth.users[0].username=app", "gateway.auth.users[0].password=s3cret",
		"gateway.storage.storageClassName=fast")
	if len(r.deployments)+len(r.configMaps) != 0 {
		t.Errorf("gateway mode rendered sidecar objects: %v %v", r.deployments, r.configMaps)
	}
	ss := get(t, r.statefulSets, "rel-hookpace")
	labels := ss.Spec.Template.Labels
	if ss.Spec.Replicas == nil || *ss.Spec.Replicas != 2 || ss.Spec.ServiceName != "rel-hookpace-headless" {
		t.Errorf("statefulset: replicas %v, serviceName %q", ss.Spec.Replicas, ss.Spec.ServiceName)
	}
	if len(ss.Spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("volumeClaimTemplates: %+v", ss.Spec.VolumeClaimTemplates)
	}
	pvc := ss.Spec.VolumeClaimTemplates[0]
	if pvc.Name != "spool" || pvc.Spec.Resources.Requests.Storage().Cmp(resource.MustParse("10Gi")) != 0 ||
		pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "fast" {
		t.Errorf("volumeClaimTemplate = %+v", pvc)
	}
	if p := ss.Spec.PersistentVolumeClaimRetentionPolicy; p == nil || p.WhenScaled != "Retain" || p.WhenDeleted != "Retain" {
		t.Errorf("PVC retention = %+v, want Retain (what was not handed off stays)", p)
	}
	pod := ss.Spec.Template.Spec
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g != 40 {
		t.Errorf("terminationGracePeriodSeconds = %v, want 40", g)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("containers: %+v", pod.Containers)
	}
	hp := pod.Containers[0]
	checkExecProbe(t, "readiness", hp.ReadinessProbe, "health", "--ready")
	checkExecProbe(t, "liveness", hp.LivenessProbe, "health")
	checkMount(t, hp, "spool", "/var/lib/hookpace")
	checkMount(t, hp, "config", "/etc/hookpace")
	if v := volume(t, pod.Volumes, "config"); v.Secret == nil || v.Secret.SecretName != "rel-hookpace" {
		t.Errorf("config volume = %+v, want the Secret", v)
	}
	if len(hp.Ports) != 1 || hp.Ports[0].Name != "proxy" || hp.Ports[0].ContainerPort != 8080 {
		t.Errorf("ports: %+v", hp.Ports)
	}

	svc := get(t, r.services, "rel-hookpace")
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8080 || svc.Spec.Ports[0].TargetPort != intstr.FromString("proxy") ||
		!subset(svc.Spec.Selector, labels) || svc.Spec.PublishNotReadyAddresses {
		t.Errorf("service = %+v", svc.Spec)
	}
	if h := get(t, r.services, "rel-hookpace-headless"); h.Spec.ClusterIP != "None" {
		t.Errorf("headless service clusterIP = %q", h.Spec.ClusterIP)
	}
	pdb := get(t, r.pdbs, "rel-hookpace")
	if pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) || !subset(pdb.Spec.Selector.MatchLabels, labels) {
		t.Errorf("pdb = %+v", pdb.Spec)
	}

	sec := get(t, r.secrets, "rel-hookpace")
	if got := sec.StringData["handoff-credentials"]; got != "app:s3cret" {
		t.Errorf("handoff-credentials = %q", got)
	}
	c := hookpaceConfig(t, sec.StringData["config.yaml"])
	// All of the pod's addresses, and no egress allow: private ranges stay refused.
	if c.Listen != "0.0.0.0:8080" || len(c.Egress.Allow) != 0 {
		t.Errorf("listen %q, egress.allow %v", c.Listen, c.Egress.Allow)
	}
	if !c.Auth.Enabled() || c.Auth.Users[0].Username != "app" {
		t.Errorf("auth = %+v", c.Auth)
	}
	// A stopping replica hands off to the others through its own Service.
	if sh := c.Shutdown; sh.Timeout.D() != 30*time.Second || sh.Drain != 0 ||
		sh.Handoff != "http://rel-hookpace.hooks.svc.cluster.local:8080" || sh.HandoffAuth != "/etc/hookpace/handoff-credentials" {
		t.Errorf("shutdown = %+v", sh)
	}
}

// TestGatewayAuthByDefault: a gateway without users gets one, generated,
// whose password is the same in the config, the hand-off credentials and
// the proxy URL for apps.
func TestGatewayAuthByDefault(t *testing.T) {
	r := render(t, "mode=gateway")
	sec := get(t, r.secrets, "rel-hookpace")
	c := hookpaceConfig(t, sec.StringData["config.yaml"])
	if !c.Auth.Enabled() || len(c.Auth.Users) != 1 || c.Auth.Users[0].Username != "hookpace" || len(c.Auth.Users[0].Password) < 32 {
		t.Fatalf("auth = %+v, want a generated user", c.Auth)
	}
	pw := c.Auth.Users[0].Password
	if sec.StringData["proxy-username"] != "hookpace" || sec.StringData["proxy-password"] != pw ||
		sec.StringData["handoff-credentials"] != "hookpace:"+pw ||
		sec.StringData["proxy-url"] != "http://hookpace:"+pw+"@rel-hookpace.hooks.svc.cluster.local:8080" {
		t.Errorf("secret %v, config password %q", sec.StringData, pw)
	}
	// The replicas hand off to their Service with these credentials.
	// Hand-offs keep their ids: the secret both ends sign with, random
	// and long enough.
	if c.Shutdown.HandoffAuth != "/etc/hookpace/handoff-credentials" || c.Shutdown.HandoffSecret != "/etc/hookpace/handoff-secret" ||
		len(sec.StringData["handoff-secret"]) < 32 {
		t.Errorf("shutdown = %+v, handoff-secret %d bytes", c.Shutdown, len(sec.StringData["handoff-secret"]))
	}
	if other := hookpaceConfig(t, get(t, render(t, "mode=gateway").secrets, "rel-hookpace").StringData["config.yaml"]); other.Auth.Users[0].Password == pw {
		t.Error("two renders without a cluster generated the same password")
	}
	if n := notes(t, "mode=gateway"); !strings.Contains(n, "key proxy-url") || strings.Contains(n, "WARNING") {
		t.Errorf("NOTES:\n%s", n)
	}
}

// TestGatewayOpen: gateway.auth.open turns the proxy auth off, with a
// warning.
func TestGatewayOpen(t *testing.T) {
	r := render(t, "mode=gateway", "gateway.auth.open=true", "gateway.handoffToService=false", "gateway.replicas=3",
		"hookpace.config.fleet.redis=redis://redis.hooks.svc:6379/0")
	sec := get(t, r.secrets, "rel-hookpace")
	c := hookpaceConfig(t, sec.StringData["config.yaml"])
	if c.Auth.Enabled() || c.Shutdown.Handoff != "" {
		t.Errorf("auth %+v, shutdown %+v", c.Auth, c.Shutdown)
	}
	// Fleet mode: the replicas share each host's limits.
	if !strings.Contains(sprint(c.Fleet), "redis.hooks.svc:6379") {
		t.Errorf("fleet = %+v", c.Fleet)
	}
	for _, k := range []string{"handoff-credentials", "proxy-url"} {
		if _, ok := sec.StringData[k]; ok {
			t.Errorf("%s without users", k)
		}
	}
	if ss := get(t, r.statefulSets, "rel-hookpace"); *ss.Spec.Replicas != 3 || ss.Spec.VolumeClaimTemplates[0].Spec.StorageClassName != nil {
		t.Errorf("replicas %d, storageClassName %v", *ss.Spec.Replicas, ss.Spec.VolumeClaimTemplates[0].Spec.StorageClassName)
	}
	if n := notes(t, "mode=gateway", "gateway.auth.open=true"); !strings.Contains(n, "WARNING: gateway.auth.open is true") {
		t.Errorf("NOTES without the warning:\n%s", n)
	}
}

// TestGatewaySharedCA: gateway replicas intercept HTTPS with one CA, from
// gateway.mitm.caSecret, that apps trust; without it, NOTES.txt warns while
// hosts are named (each replica would make a CA of its own).
func TestGatewaySharedCA(t *testing.T) {
	host := `hookpace.config.hosts.api\.partner\.example.rate=5/s`
	r := render(t, "mode=gateway", "gateway.mitm.caSecret=hookpace-ca", host)
	c := hookpaceConfig(t, get(t, r.secrets, "rel-hookpace").StringData["config.yaml"])
	if c.MITM.CACert != "/etc/hookpace-ca/ca.crt" || c.MITM.CAKey != "/etc/hookpace-ca/ca.key" {
		t.Errorf("mitm = %+v", c.MITM)
	}
	pod := get(t, r.statefulSets, "rel-hookpace").Spec.Template.Spec
	var mounted, volume bool
	for _, m := range pod.Containers[0].VolumeMounts {
		mounted = mounted || m.Name == "mitm-ca" && m.MountPath == "/etc/hookpace-ca" && m.ReadOnly
	}
	for _, v := range pod.Volumes {
		volume = volume || v.Name == "mitm-ca" && v.Secret != nil && v.Secret.SecretName == "hookpace-ca"
	}
	if !mounted || !volume {
		t.Errorf("the CA Secret is not mounted: mount %v, volume %v", mounted, volume)
	}
	if n := notes(t, "mode=gateway", "gateway.mitm.caSecret=hookpace-ca", host); !strings.Contains(n, "Secret hookpace-ca: apps trust its ca.crt") || strings.Contains(n, "WARNING") {
		t.Errorf("NOTES with a CA Secret:\n%s", n)
	}
	if n := notes(t, "mode=gateway", host); !strings.Contains(n, "WARNING: hosts are named in the config") {
		t.Errorf("NOTES without a CA Secret but with hosts, no warning:\n%s", n)
	}
	if n := notes(t, "mode=gateway"); strings.Contains(n, "WARNING") {
		t.Errorf("NOTES without hosts warns:\n%s", n)
	}
}

package charts

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestSidecar(t *testing.T) {
	r := render(t) // the default mode
	if len(r.statefulSets)+len(r.services)+len(r.pdbs)+len(r.secrets) != 0 {
		t.Errorf("sidecar mode rendered gateway objects: %v %v %v %v", r.statefulSets, r.services, r.pdbs, r.secrets)
	}
	d := get(t, r.deployments, "rel")
	pod := d.Spec.Template.Spec
	if len(pod.InitContainers) != 1 || pod.InitContainers[0].Name != "hookpace" {
		t.Fatalf("init containers: %+v", pod.InitContainers)
	}
	hp := pod.InitContainers[0]
	// A native sidecar: an init container that keeps running, stopped after the app.
	if hp.RestartPolicy == nil || *hp.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("hookpace restartPolicy = %v, want Always", hp.RestartPolicy)
	}
	checkExecProbe(t, "startup", hp.StartupProbe, "health")
	checkExecProbe(t, "liveness", hp.LivenessProbe, "health")
	// app.stopSeconds 10 + shutdown.timeoutSeconds 30 + 10 to close the spool.
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g != 50 {
		t.Errorf("terminationGracePeriodSeconds = %v, want 50", g)
	}
	if v := volume(t, pod.Volumes, "spool"); v.EmptyDir == nil || v.EmptyDir.SizeLimit.Cmp(resource.MustParse("2Gi")) != 0 {
		t.Errorf("spool volume = %+v, want an emptyDir of 2Gi", v)
	}
	if v := volume(t, pod.Volumes, "config"); v.ConfigMap == nil || v.ConfigMap.Name != "rel-hookpace" {
		t.Errorf("config volume = %+v", v)
	}
	checkMount(t, hp, "spool", "/var/lib/hookpace")
	checkMount(t, hp, "config", "/etc/hookpace")
	if len(pod.Containers) != 1 || !slices.Contains(pod.Containers[0].Env, corev1.EnvVar{Name: "HTTP_PROXY", Value: "http://127.0.0.1:8080"}) {
		t.Errorf("app container: %+v", pod.Containers)
	}
	c := hookpaceConfig(t, get(t, r.configMaps, "rel-hookpace").Data["config.yaml"])
	if c.Shutdown.Timeout.D() != 30*time.Second || c.Shutdown.Drain != 0 || c.Shutdown.Handoff != "" {
		t.Errorf("shutdown = %+v", c.Shutdown)
	}
	if c.Listen != "127.0.0.1:8080" || c.Spool.Dir != "/var/lib/hookpace" {
		t.Errorf("listen %q, spool.dir %q", c.Listen, c.Spool.Dir)
	}
}

func TestSidecarHandoffToGateway(t *testing.T) {
	r := render(t, "hookpace.shutdown.drainSeconds=20", "hookpace.shutdown.timeoutSeconds=40", "app.stopSeconds=5",
		"hookpace.shutdown.handoff=http://gw-hookpace.hooks.svc.cluster.local:8080", "hookpace.shutdown.handoffSecret=gw-hookpace",
		"hookpace.spool.persistentVolumeClaim=spool-claim")
	pod := get(t, r.deployments, "rel").Spec.Template.Spec
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g != 55 {
		t.Errorf("terminationGracePeriodSeconds = %v, want 55", g)
	}
	if v := volume(t, pod.Volumes, "handoff"); v.Secret == nil || v.Secret.SecretName != "gw-hookpace" ||
		len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != "handoff-credentials" {
		t.Errorf("handoff volume = %+v", v)
	}
	if v := volume(t, pod.Volumes, "spool"); v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "spool-claim" {
		t.Errorf("spool volume = %+v", v)
	}
	checkMount(t, pod.InitContainers[0], "handoff", "/etc/hookpace-handoff")
	c := hookpaceConfig(t, get(t, r.configMaps, "rel-hookpace").Data["config.yaml"])
	want := "{Timeout:40s Drain:20s Handoff:http://gw-hookpace.hooks.svc.cluster.local:8080 HandoffAuth:/etc/hookpace-handoff/handoff-credentials}"
	if got := strings.TrimSpace(sprint(c.Shutdown)); got != want {
		t.Errorf("shutdown = %s\nwant %s", got, want)
	}
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
	want := "{Timeout:30s Drain:0s Handoff:http://rel-hookpace.hooks.svc.cluster.local:8080 HandoffAuth:/etc/hookpace/handoff-credentials}"
	if got := sprint(c.Shutdown); got != want {
		t.Errorf("shutdown = %s\nwant %s", got, want)
	}
}

func TestGatewayWithoutAuth(t *testing.T) {
	r := render(t, "mode=gateway", "gateway.handoffToService=false", "gateway.replicas=3",
		"hookpace.config.fleet.redis=redis://redis.hooks.svc:6379/0")
	c := hookpaceConfig(t, get(t, r.secrets, "rel-hookpace").StringData["config.yaml"])
	if c.Auth.Enabled() || c.Shutdown.Handoff != "" {
		t.Errorf("auth %+v, shutdown %+v", c.Auth, c.Shutdown)
	}
	// Fleet mode: the replicas share each host's limits.
	if !strings.Contains(sprint(c.Fleet), "redis.hooks.svc:6379") {
		t.Errorf("fleet = %+v", c.Fleet)
	}
	if _, ok := get(t, r.secrets, "rel-hookpace").StringData["handoff-credentials"]; ok {
		t.Error("handoff-credentials without users")
	}
	if ss := get(t, r.statefulSets, "rel-hookpace"); *ss.Spec.Replicas != 3 || ss.Spec.VolumeClaimTemplates[0].Spec.StorageClassName != nil {
		t.Errorf("replicas %d, storageClassName %v", *ss.Spec.Replicas, ss.Spec.VolumeClaimTemplates[0].Spec.StorageClassName)
	}
}

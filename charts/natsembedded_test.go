package charts

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
)

// The gateway with embedded NATS: a StatefulSet of three started in
// parallel, each replica's config naming every replica's cluster port
// through the headless Service (which publishes pods before they are
// ready), its own client port first; the JetStream store on the replica's
// volume; the user's replication settings kept.
func TestGatewayEmbeddedNATS(t *testing.T) {
	r := render(t, "mode=gateway", "gateway.replicas=3", "gateway.nats.embedded=true",
		"hookpace.config.spool.replicate.nats.adopt_after=10s")
	sts := get(t, r.statefulSets, "rel-hookpace")
	if *sts.Spec.Replicas != 3 || sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement || sts.Spec.ServiceName != "rel-hookpace-headless" {
		t.Fatalf("statefulset: replicas %d, policy %q, service %q", *sts.Spec.Replicas, sts.Spec.PodManagementPolicy, sts.Spec.ServiceName)
	}
	c := sts.Spec.Template.Spec.Containers[0]
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["nats"] != 4222 || ports["nats-cluster"] != 6222 {
		t.Errorf("container ports %v, want nats 4222 and nats-cluster 6222", ports)
	}
	checkMount(t, c, "spool", "/var/lib/hookpace")

	headless := get(t, r.services, "rel-hookpace-headless")
	if !headless.Spec.PublishNotReadyAddresses {
		t.Error("the headless Service must publish replicas before they are ready: they become ready once a majority of servers is up")
	}
	sports := map[string]string{}
	for _, p := range headless.Spec.Ports {
		sports[p.Name] = fmt.Sprintf("%d->%s", p.Port, p.TargetPort.String())
	}
	if sports["nats"] != "4222->nats" || sports["nats-cluster"] != "6222->nats-cluster" {
		t.Errorf("headless Service ports %v", sports)
	}
	for _, p := range get(t, r.services, "rel-hookpace").Spec.Ports {
		if p.Name != "proxy" {
			t.Errorf("the apps' Service exposes %s: NATS stays on the headless one", p.Name)
		}
	}

	cfg := hookpaceConfig(t, get(t, r.secrets, "rel-hookpace").StringData["config.yaml"])
	rep := cfg.Spool.Replicate
	e := rep.Embedded
	if !rep.Enabled() || e == nil {
		t.Fatalf("replicate = %+v", rep)
	}
	var peers, urls []string
	for i := range 3 {
		// The pod's DNS name under the StatefulSet's governing Service.
		host := fmt.Sprintf("%s-%d.%s.hooks.svc.cluster.local", sts.Name, i, sts.Spec.ServiceName)
		peers = append(peers, host+":6222")
		urls = append(urls, "nats://"+host+":4222")
	}
	if !slices.Equal(e.Peers, peers) || !slices.Equal(rep.URLs, urls) || e.Listen != "0.0.0.0:4222" || e.ClusterListen != "0.0.0.0:6222" {
		t.Errorf("embedded = %+v, urls %v; want peers %v", e, rep.URLs, peers)
	}
	// The store defaults to <spool.dir>/nats: on the volume.
	if e.StoreDir != "" || cfg.Spool.Dir != "/var/lib/hookpace" || rep.Replicas != 3 || rep.AdoptAfter.D() != 10*time.Second {
		t.Errorf("store %q, spool dir %q, replicas %d, adopt_after %v", e.StoreDir, cfg.Spool.Dir, rep.Replicas, rep.AdoptAfter.D())
	}
	if _, err := helm(t, "lint", "--strict", chart, "--set", "mode=gateway", "--set", "gateway.replicas=3", "--set", "gateway.nats.embedded=true"); err != nil {
		t.Errorf("lint: %v", err)
	}

	// Five replicas, other ports.
	r = render(t, "mode=gateway", "gateway.replicas=5", "gateway.nats.embedded=true", "gateway.nats.clientPort=5222", "gateway.nats.clusterPort=7222")
	cfg = hookpaceConfig(t, get(t, r.secrets, "rel-hookpace").StringData["config.yaml"])
	if e := cfg.Spool.Replicate.Embedded; len(e.Peers) != 5 || !strings.HasSuffix(e.Peers[4], "rel-hookpace-4.rel-hookpace-headless.hooks.svc.cluster.local:7222") ||
		e.Listen != "0.0.0.0:5222" || e.ClusterListen != "0.0.0.0:7222" {
		t.Errorf("five replicas: %+v", e)
	}

	// A replication change rolls the pods (hookpace reads it at start).
	a := get(t, render(t, "mode=gateway", "gateway.replicas=3", "gateway.nats.embedded=true").statefulSets, "rel-hookpace")
	b := get(t, render(t, "mode=gateway", "gateway.replicas=4", "gateway.nats.embedded=true").statefulSets, "rel-hookpace")
	if a.Spec.Template.Annotations["checksum/restart"] == b.Spec.Template.Annotations["checksum/restart"] {
		t.Error("a change of the peers does not roll the pods")
	}

	// Without it: none of it.
	r = render(t, "mode=gateway", "gateway.replicas=3")
	sts = get(t, r.statefulSets, "rel-hookpace")
	if sts.Spec.PodManagementPolicy == appsv1.ParallelPodManagement || len(sts.Spec.Template.Spec.Containers[0].Ports) != 1 ||
		get(t, r.services, "rel-hookpace-headless").Spec.PublishNotReadyAddresses {
		t.Errorf("gateway without embedded NATS: %s", sprint(sts.Spec))
	}
	if cfg := hookpaceConfig(t, get(t, r.secrets, "rel-hookpace").StringData["config.yaml"]); cfg.Spool.Replicate.Enabled() {
		t.Errorf("replication without embedded NATS: %+v", cfg.Spool.Replicate)
	}

	out, err := helm(t, "template", "rel", chart, "--set", "mode=gateway", "--set", "gateway.nats.embedded=true")
	if err == nil || !strings.Contains(out+err.Error(), "gateway.nats.embedded: needs gateway.replicas of 3 or more") {
		t.Errorf("embedded NATS with the default 2 replicas: %v\n%s", err, out)
	}
}

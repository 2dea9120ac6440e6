package charts

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/inject"
)

// TestSidecarInbound: sidecar.inbound renders a route per app port into
// the config (hookpace's loader reads it: the route's name, listen, the
// app's loopback URL, a verify given in the values, the app's hosts entry
// with concurrency: auto) and --inbound in NOTES.txt's inject command and
// the injector's args; the command gives the sidecar the named ports the
// routes listen on and mounts the inbound Secret. A port whose default
// listener would pass 65535 is refused.
func TestSidecarInbound(t *testing.T) {
	sets := []string{"sidecar.inbound[0]=3000", "sidecar.inbound[1].port=5000", "sidecar.inbound[1].listenPort=25000",
		"sidecar.inbound[1].verify.scheme=github", "sidecar.inbound[1].verify.secret_file=/etc/hookpace-inbound/github",
		"sidecar.inboundSecret=provider-secrets"}
	r := render(t, append(sets, "injector.enabled=true")...)
	text := r.configMaps["hookpace"].Data["config.yaml"]
	cfg, err := config.Parse("config.yaml", []byte(text))
	if err != nil {
		t.Fatalf("hookpace does not load the chart's config: %v\n%s", err, text)
	}
	if len(cfg.Inbound) != 2 {
		t.Fatalf("routes %+v\n%s", cfg.Inbound, text)
	}
	for i, want := range []struct{ name, listen, to string }{{"hp-in-3000", ":13000", "http://127.0.0.1:3000"}, {"hp-in-5000", ":25000", "http://127.0.0.1:5000"}} {
		if rt := cfg.Inbound[i]; rt.Name != want.name || rt.Listen != want.listen || rt.To != want.to {
			t.Errorf("route %d: %s %s %s, want %+v", i, rt.Name, rt.Listen, rt.To, want)
		}
	}
	if v := cfg.Inbound[1].Verify; v == nil || v.Scheme != config.VerifyGitHub || cfg.Inbound[0].Verify != nil {
		t.Errorf("verify %+v on the second route only", v)
	}
	if !strings.Contains(text, "127.0.0.1:3000:\n    burst: 100\n    concurrency: auto") {
		t.Errorf("no hosts entry with concurrency: auto for the app:\n%s", text)
	}

	flags := strings.Join(injectFlags(t, sets...), " ")
	if flags != "--inbound 3000 --inbound 5000:25000 --inbound-secret provider-secrets" {
		t.Errorf("inject flags %q", flags)
	}
	args := strings.Join(r.deployments["rel-hookpace-injector"].Spec.Template.Spec.Containers[0].Args, " ")
	if !strings.Contains(args, "--inbound 3000 --inbound 5000:25000 --inbound-secret provider-secrets") {
		t.Errorf("injector args %q", args)
	}
	d := injected(t, sets...)
	var sidecar corev1.Container
	for _, c := range d.Spec.Template.Spec.InitContainers {
		if c.Name == inject.ContainerName {
			sidecar = c
		}
	}
	ports := map[string]int32{}
	for _, p := range sidecar.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["hp-in-3000"] != 13000 || ports["hp-in-5000"] != 25000 {
		t.Errorf("sidecar ports %v", sidecar.Ports)
	}
	checkMount(t, sidecar, inject.InboundSecretVolume, inject.InboundSecretDir)
	if v := volume(t, d.Spec.Template.Spec.Volumes, inject.InboundSecretVolume); v.Secret == nil || v.Secret.SecretName != "provider-secrets" {
		t.Errorf("inbound Secret volume %+v", v)
	}

	if flags := strings.Join(injectFlags(t, "sidecar.inbound[0]=3000", "sidecar.inboundTargetNumber=true"), " "); flags != "--inbound 3000 --inbound-target-number" {
		t.Errorf("with inboundTargetNumber, inject flags %q", flags)
	}
	if _, err := helm(t, "template", "rel", chart, "--set", "sidecar.inbound[0]=60000"); err == nil || !strings.Contains(err.Error(), "set listenPort") {
		t.Errorf("port 60000 without listenPort: %v", err)
	}
}

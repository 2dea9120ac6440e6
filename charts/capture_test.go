package charts

import (
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/hookpace/hookpace/inject"
)

// TestSidecarCapture: sidecar.capture.enabled renders capture.listen in
// the config and --capture with the cluster's ranges in NOTES.txt's
// inject command, which gives the pod the init container that applies
// the rules before hookpace starts; without a service range the chart
// refuses.
func TestSidecarCapture(t *testing.T) {
	sets := []string{"sidecar.capture.enabled=true", "sidecar.capture.serviceCIDRs={10.96.0.0/12}", "sidecar.capture.clusterCIDRs={10.244.0.0/16}"}
	r := render(t, sets...)
	var cfg struct {
		Capture struct{ Listen string }
	}
	if err := yaml.Unmarshal([]byte(r.configMaps["hookpace"].Data["config.yaml"]), &cfg); err != nil || cfg.Capture.Listen != ":15001" {
		t.Errorf("capture.listen %q (%v), want \":15001\"", cfg.Capture.Listen, err)
	}
	flags := strings.Join(injectFlags(t, sets...), " ")
	if flags != "--capture --service-cidr 10.96.0.0/12 --cluster-cidr 10.244.0.0/16" {
		t.Errorf("inject flags %q", flags)
	}
	d := injected(t, sets...)
	inits := d.Spec.Template.Spec.InitContainers
	if len(inits) < 2 || inits[0].Name != inject.CaptureContainerName || inits[1].Name != inject.ContainerName ||
		!slices.Contains(inits[0].Args, "10.96.0.0/12") || !slices.Contains(inits[0].Args, "10.244.0.0/16") {
		t.Errorf("init containers %+v", inits)
	}

	flags = strings.Join(injectFlags(t, append(sets, "hookpace.config.capture.listen=:15006")...), " ")
	if !strings.Contains(flags, "--capture --capture-port 15006") {
		t.Errorf("with capture.listen :15006, inject flags %q", flags)
	}
	if _, err := helm(t, "template", "rel", chart, "--set", "sidecar.capture.enabled=true"); err == nil || !strings.Contains(err.Error(), "sidecar.capture.serviceCIDRs") {
		t.Errorf("capture without a service range: %v", err)
	}
}

package charts

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestAddressesFromValues: the probes' admin address and the
// app's HTTP_PROXY follow hookpace.config's admin and listen instead of
// 127.0.0.1:9090 and :8080; a wildcard listener is dialled on 127.0.0.1;
// with a ServiceMonitor the admin listener keeps its port on all of the
// pod's addresses, and the Service and container port follow it. In
// sidecar mode the pod is what the hookpace inject command of NOTES.txt
// makes of a Deployment.
func TestAddressesFromValues(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sets      []string
		probe     string // --admin of every probe
		proxy     string // the app's HTTP_PROXY (sidecar)
		adminPort int32  // with a ServiceMonitor: container and Service port
	}{
		{"defaults", nil, "127.0.0.1:9090", "http://127.0.0.1:8080", 0},
		{"moved", []string{"hookpace.config.admin=127.0.0.1:19090", "hookpace.config.listen=127.0.0.1:18080"},
			"127.0.0.1:19090", "http://127.0.0.1:18080", 0},
		{"wildcard listen", []string{"hookpace.config.listen=0.0.0.0:3128"}, "127.0.0.1:9090", "http://127.0.0.1:3128", 0},
		{"servicemonitor", []string{"monitoring.serviceMonitor.enabled=true", "monitoring.serviceMonitor.podSelector.app=web", "hookpace.config.admin=127.0.0.1:19091"},
			"127.0.0.1:19091", "http://127.0.0.1:8080", 19091},
	} {
		for _, mode := range []string{"sidecar", "gateway"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				r := render(t, append([]string{"mode=" + mode}, tc.sets...)...)
				var hp corev1.Container
				var probes []*corev1.Probe
				adminPort := "admin"
				if mode == "sidecar" {
					pod := injected(t, append([]string{"mode=" + mode}, tc.sets...)...).Spec.Template.Spec
					hp, adminPort = pod.InitContainers[0], "hookpace-admin"
					if !slices.Contains(pod.Containers[0].Env, corev1.EnvVar{Name: "HTTP_PROXY", Value: tc.proxy}) ||
						!slices.Contains(pod.Containers[0].Env, corev1.EnvVar{Name: "http_proxy", Value: tc.proxy}) {
						t.Errorf("app env %v, want HTTP_PROXY and http_proxy %s", pod.Containers[0].Env, tc.proxy)
					}
				} else {
					hp = get(t, r.statefulSets, "rel-hookpace").Spec.Template.Spec.Containers[0]
				}
				probes = append(probes, hp.StartupProbe, hp.LivenessProbe)
				if hp.ReadinessProbe != nil {
					probes = append(probes, hp.ReadinessProbe)
				}
				for _, p := range probes {
					cmd := p.Exec.Command
					if i := slices.Index(cmd, "--admin"); i < 0 || i+1 >= len(cmd) || cmd[i+1] != tc.probe {
						t.Errorf("probe %v, want --admin %s", cmd, tc.probe)
					}
				}
				if tc.adminPort == 0 {
					return
				}
				if !slices.ContainsFunc(hp.Ports, func(p corev1.ContainerPort) bool { return p.Name == adminPort && p.ContainerPort == tc.adminPort }) {
					t.Errorf("hookpace ports %v, want %s %d", hp.Ports, adminPort, tc.adminPort)
				}
				if svc := get(t, r.services, "rel-hookpace-metrics"); svc.Spec.Ports[0].Port != tc.adminPort || svc.Spec.Ports[0].TargetPort.StrVal != adminPort {
					t.Errorf("metrics Service port %+v, want %d to %s", svc.Spec.Ports[0], tc.adminPort, adminPort)
				}
				var cfg string
				if mode == "sidecar" {
					cfg = get(t, r.configMaps, "hookpace").Data["config.yaml"]
				} else {
					cfg = get(t, r.secrets, "rel-hookpace").StringData["config.yaml"]
				}
				if want := fmt.Sprintf("listen: 0.0.0.0:%d", tc.adminPort); !strings.Contains(cfg, want) {
					t.Errorf("rendered config without %q:\n%s", want, cfg)
				}
			})
		}
	}
}

// Package charts tests the Helm chart: helm lint, helm template in both
// modes, every rendered document decoded strictly into its Kubernetes API
// type, and the hookpace config it renders parsed by hookpace's own config
// package.
package charts

import (
	"bytes"
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/hookpace/hookpace/config"
)

const chart = "hookpace"

// helmBin finds helm on PATH or where `go install` puts it.
func helmBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	p := filepath.Join(build.Default.GOPATH, "bin", "helm")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	t.Fatal("helm not found on PATH nor in $GOPATH/bin: go install helm.sh/helm/v3/cmd/helm@v3.22.0 (.ci/run does)")
	return ""
}

func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(helmBin(t), args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("helm %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), err
}

// rendered holds every document of a helm template run, decoded strictly.
type rendered struct {
	deployments  map[string]*appsv1.Deployment
	statefulSets map[string]*appsv1.StatefulSet
	services     map[string]*corev1.Service
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret
	pdbs         map[string]*policyv1.PodDisruptionBudget
	rules        map[string]*prometheusRule // monitoring_test.go
	monitors     map[string]*serviceMonitor // monitoring_test.go
	webhooks     map[string]*admissionregistrationv1.MutatingWebhookConfiguration
}

func render(t *testing.T, sets ...string) *rendered {
	t.Helper()
	args := []string{"template", "rel", chart, "--namespace", "hooks"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	r := &rendered{map[string]*appsv1.Deployment{}, map[string]*appsv1.StatefulSet{}, map[string]*corev1.Service{},
		map[string]*corev1.ConfigMap{}, map[string]*corev1.Secret{}, map[string]*policyv1.PodDisruptionBudget{},
		map[string]*prometheusRule{}, map[string]*serviceMonitor{}, map[string]*admissionregistrationv1.MutatingWebhookConfiguration{}}
	for _, doc := range strings.Split(out, "\n---\n") {
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("rendered document: %v\n%s", err, doc)
		}
		if head.Kind == "" {
			continue // comments only
		}
		var obj any
		switch head.Kind {
		case "Deployment":
			obj = put(r.deployments, head.Metadata.Name)
		case "StatefulSet":
			obj = put(r.statefulSets, head.Metadata.Name)
		case "Service":
			obj = put(r.services, head.Metadata.Name)
		case "ConfigMap":
			obj = put(r.configMaps, head.Metadata.Name)
		case "Secret":
			obj = put(r.secrets, head.Metadata.Name)
		case "PodDisruptionBudget":
			obj = put(r.pdbs, head.Metadata.Name)
		case "PrometheusRule":
			obj = put(r.rules, head.Metadata.Name)
		case "ServiceMonitor":
			obj = put(r.monitors, head.Metadata.Name)
		case "MutatingWebhookConfiguration":
			obj = put(r.webhooks, head.Metadata.Name)
		default:
			t.Fatalf("rendered a %s (%s) that the test does not know", head.Kind, head.Metadata.Name)
		}
		// Unknown or duplicate fields are errors: a typo'd field would be
		// dropped silently by the API server's non-strict decoding.
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s %s does not decode strictly: %v\n%s", head.Kind, head.Metadata.Name, err, doc)
		}
	}
	return r
}

func put[T any](m map[string]*T, name string) *T {
	v := new(T)
	m[name] = v
	return v
}

func get[T any](t *testing.T, m map[string]*T, name string) *T {
	t.Helper()
	v, ok := m[name]
	if !ok {
		t.Fatalf("no %T named %q rendered", v, name)
	}
	return v
}

// hookpaceConfig parses a rendered config.yaml with hookpace's own loader.
func hookpaceConfig(t *testing.T, data string) *config.Config {
	t.Helper()
	c, err := config.Parse("config.yaml", []byte(data))
	if err != nil {
		t.Fatalf("rendered config.yaml is not valid for hookpace: %v\n%s", err, data)
	}
	return c
}

func TestLint(t *testing.T) {
	for _, sets := range [][]string{{"mode=sidecar"}, {"mode=gateway"}, {"mode=gateway", "gateway.auth.open=true"},
		{"monitoring.serviceMonitor.enabled=true", "monitoring.serviceMonitor.podSelector.app=web"}} {
		args := []string{"lint", "--strict", chart}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		if out, err := helm(t, args...); err != nil {
			t.Errorf("%v: %v\n%s", sets, err, out)
		}
	}
}

func TestTemplateRejects(t *testing.T) {
	tests := []struct {
		name string
		sets []string
		want string
	}{
		{"unknown mode", []string{"mode=daemon"}, `at '/mode': value must be one of 'sidecar', 'gateway'`}, // values.schema.json
		{"drain leaving no room for the hand-off", []string{"mode=gateway", "hookpace.shutdown.timeoutSeconds=10", "hookpace.shutdown.drainSeconds=6"},
			"drainSeconds: 6 leaves 4 s of timeoutSeconds (10) for the hand-off"},
		{"shutdown in config", []string{"hookpace.config.shutdown.timeout=5s"}, "hookpace.config.shutdown: set hookpace.shutdown instead"},
		{"handoff secret without handoff", []string{"hookpace.shutdown.handoffSecret=gw-hookpace"}, "handoffSecret: set without a hand-off target"},
		{"sidecar listening where the apps cannot reach it", []string{"hookpace.config.listen=10.0.0.5:8080"}, "apps reach hookpace on 127.0.0.1"},
		{"sidecar ServiceMonitor without the pods' labels", []string{"monitoring.serviceMonitor.enabled=true"}, "monitoring.serviceMonitor.podSelector"},
		{"sidecar with its own trust directory", []string{"hookpace.config.mitm.public_dir=/trust"}, "mitm.public_dir: in sidecar mode"},
		{"open gateway with users", []string{"mode=gateway", "gateway.auth.open=true", "gateway.auth.users[0].username=a", "gateway.auth.users[0].password=b"},
			"gateway.auth.open: true and gateway.auth.users"},
	}
	for _, tt := range tests {
		args := []string{"template", "rel", chart}
		for _, s := range tt.sets {
			args = append(args, "--set", s)
		}
		if _, err := helm(t, args...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to say %q", tt.name, err, tt.want)
		}
	}
}

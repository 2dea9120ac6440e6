package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// TestInjectDeployment checks hookpace inject: on a
// plain two-container Deployment the real binary writes YAML that decodes
// strictly, with hookpace as a native sidecar and HTTP_PROXY, HTTPS_PROXY
// and NO_PROXY (with .svc and .cluster.local) on both app containers; its
// own output injected again comes back unchanged.
func TestInjectDeployment(t *testing.T) {
	t.Parallel()
	deploy := filepath.Join(t.TempDir(), "deploy.yaml")
	os.WriteFile(deploy, []byte(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop
spec:
  replicas: 2
  selector:
    matchLabels: {app: shop}
  template:
    metadata:
      labels: {app: shop}
    spec:
      containers:
        - name: web
          image: registry.example.com/shop/web:1
        - name: worker
          image: registry.example.com/shop/worker:1
`), 0o644)
	run := func(stdin []byte, args ...string) []byte {
		t.Helper()
		cmd := exec.Command(binary, args...)
		var out, errb bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("hookpace %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.Bytes()
	}
	out := run(nil, "inject", "-f", deploy)

	var d appsv1.Deployment
	if err := sigsyaml.UnmarshalStrict(out, &d); err != nil {
		t.Fatalf("the output does not decode strictly into a Deployment: %v\n%s", err, out)
	}
	pod := d.Spec.Template.Spec
	if len(pod.InitContainers) != 1 || pod.InitContainers[0].Name != "hookpace" || pod.InitContainers[0].RestartPolicy == nil ||
		*pod.InitContainers[0].RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("init containers %+v: want hookpace as a native sidecar", pod.InitContainers)
	}
	if len(pod.Containers) != 2 {
		t.Fatalf("containers %+v", pod.Containers)
	}
	for _, c := range pod.Containers {
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		if env["HTTP_PROXY"] != "http://127.0.0.1:8080" || env["HTTPS_PROXY"] != "http://127.0.0.1:8080" {
			t.Errorf("%s: HTTP_PROXY %q, HTTPS_PROXY %q", c.Name, env["HTTP_PROXY"], env["HTTPS_PROXY"])
		}
		noProxy := "," + env["NO_PROXY"] + ","
		if !strings.Contains(noProxy, ",.svc,") || !strings.Contains(noProxy, ",.cluster.local,") {
			t.Errorf("%s: NO_PROXY %q lacks .svc or .cluster.local", c.Name, env["NO_PROXY"])
		}
	}
	if again := run(out, "inject"); !bytes.Equal(again, out) {
		t.Errorf("injecting the output again changed it:\n%s\n---- again:\n%s", out, again)
	}
}

package cli

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const plainPod = `apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - {name: app, image: registry.example.com/app:1}
`

// hookpace inject reads stdin without -f, and files with -f (twice: one
// stream out); it reports on stderr, refuses with exit 1 and no output,
// and a bad flag is a usage error.
func TestInjectCommand(t *testing.T) {
	defer func(r io.Reader) { stdin = r }(stdin)
	stdin = strings.NewReader(plainPod)
	code, out, errOut := runMain("inject", "--no-proxy", "payments.internal")
	if code != 0 || !strings.Contains(out, "name: hookpace") || !strings.Contains(out, ".cluster.local,169.254.169.254,metadata.google.internal,payments.internal") ||
		!strings.Contains(errOut, "stdin: Pod/p: injected") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}

	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	os.WriteFile(a, []byte(plainPod), 0o644)
	os.WriteFile(b, []byte(out), 0o644)
	code, out2, errOut := runMain("inject", "--no-proxy", "payments.internal", "-f", a, "-f", b)
	if code != 0 || strings.Count(out2, "kind: Pod") != 2 || !strings.Contains(out2, "\n---\n") || !strings.Contains(errOut, "b.yaml: Pod/p: already injected") {
		t.Errorf("two files: exit %d\nstdout %s\nstderr %s", code, out2, errOut)
	}

	os.WriteFile(b, []byte(strings.Replace(plainPod, "image:", "env: [{name: HTTP_PROXY, value: x}], image:", 1)), 0o644)
	code, out, errOut = runMain("inject", "-f", a, "-f", b)
	if code != 1 || out != "" || !strings.Contains(errOut, "nothing written") || !strings.Contains(errOut, `Pod/p: container "app" sets HTTP_PROXY already`) {
		t.Errorf("refusal: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if code, _, errOut = runMain("inject", "--proxy-port", "many"); code != 2 {
		t.Errorf("bad flag: exit %d, stderr %s", code, errOut)
	}
	if code, _, errOut = runMain("inject", "-f", filepath.Join(dir, "missing.yaml")); code != 1 || !strings.Contains(errOut, "missing.yaml") {
		t.Errorf("missing file: exit %d, stderr %s", code, errOut)
	}
}

// hookpace inject --image NEW on injected output changes the image only,
// and hookpace uninject of either gives back the input.
func TestUpgradeAndUninjectCommand(t *testing.T) {
	dir := t.TempDir()
	plain, v1, v2 := filepath.Join(dir, "deploy.yaml"), filepath.Join(dir, "v1.yaml"), filepath.Join(dir, "v2.yaml")
	os.WriteFile(plain, []byte(plainPod), 0o644)
	code, out1, errOut := runMain("inject", "--image", "reg/hookpace:0.1.0", "-f", plain)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	os.WriteFile(v1, []byte(out1), 0o644)
	code, out2, errOut := runMain("inject", "--image", "reg/hookpace:0.2.0", "-f", v1)
	if code != 0 || strings.Replace(out1, "reg/hookpace:0.1.0", "reg/hookpace:0.2.0", 1) != out2 || !strings.Contains(errOut, "re-injected") {
		t.Fatalf("upgrade: exit %d\n%s\n%s", code, out2, errOut)
	}
	os.WriteFile(v2, []byte(out2), 0o644)
	code, back, errOut := runMain("uninject", "-f", v2)
	if code != 0 || !strings.Contains(errOut, "v2.yaml: Pod/p: hookpace removed") || strings.Contains(back, "hookpace") ||
		!strings.Contains(back, "registry.example.com/app:1") {
		t.Errorf("uninject: exit %d\n%s\n%s", code, back, errOut)
	}
	if code, _, errOut = runMain("uninject", "extra"); code != 2 {
		t.Errorf("uninject extra: exit %d %s", code, errOut)
	}
}

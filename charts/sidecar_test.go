package charts

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/hookpace/hookpace/cli"
)

// notes renders NOTES.txt (helm template skips it) through a copy of the
// chart that puts it in a ConfigMap.
func notes(t *testing.T, sets ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(chart)); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(chart, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "files", "notes.txt"), text, 0o644)
	os.WriteFile(filepath.Join(dir, "templates", "notes-test.yaml"), []byte(
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\ndata:\n  notes: |\n{{ tpl (.Files.Get \"files/notes.txt\") . | indent 4 }}\n"), 0o644)
	args := []string{"template", "rel", dir, "--namespace", "hooks", "--show-only", "templates/notes-test.yaml"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal([]byte(out), &cm); err != nil {
		t.Fatal(err)
	}
	return cm.Data["notes"]
}

var injectLine = regexp.MustCompile(`hookpace inject -f deploy\.yaml(.*) \| kubectl`)

// injectFlags are the flags of the hookpace inject command that a
// sidecar-mode release's NOTES.txt prints.
func injectFlags(t *testing.T, sets ...string) []string {
	t.Helper()
	n := notes(t, sets...)
	m := injectLine.FindStringSubmatch(n)
	if m == nil {
		t.Fatalf("NOTES.txt has no hookpace inject command:\n%s", n)
	}
	return strings.Fields(m[1])
}

// webDeployment is what a team already runs (two containers, its pods
// labelled app: web): inject's own test manifest.
const webDeployment = "../inject/testdata/deployment.yaml"

// injected runs the command the release's NOTES.txt prints (hookpace
// inject, through the real command line) on webDeployment, and decodes
// the result strictly: the pod that sidecar mode gives a team.
func injected(t *testing.T, sets ...string) *appsv1.Deployment {
	t.Helper()
	flags := injectFlags(t, sets...)
	var out, errb bytes.Buffer
	if code := cli.Main(append([]string{"inject", "-f", webDeployment}, flags...), &out, &errb); code != 0 {
		t.Fatalf("hookpace inject %v: exit %d: %s", flags, code, errb.String())
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(out.Bytes(), &d); err != nil {
		t.Fatalf("injected Deployment does not decode strictly: %v\n%s", err, out.String())
	}
	return &d
}

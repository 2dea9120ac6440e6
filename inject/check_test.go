package inject

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// TestCheck: a cluster's objects, some injected by inject itself (one
// with an old image), some labelled but not injected, are reported as
// the four cases; the ConfigMap's fleet.redis and
// shutdown.handoff clear their findings.
func TestCheck(t *testing.T) {
	old := Defaults()
	old.Image, old.AcceptLoss = "reg/hookpace:0.1.0", true
	web := strings.Replace(deployment(appContainer), "name: web\n", "name: web\n  namespace: shop\n", 1)
	web = strings.Replace(web, "spec:\n  selector", "spec:\n  replicas: 3\n  selector", 1)
	oldWeb, log, err := injectBytes(t, old, []byte(web))
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	cur := Defaults()
	cur.AcceptLoss = true
	job, log, err := injectBytes(t, cur, bytes.Replace(readTestdata(t, "job.yaml"), []byte("name: backfill\n"), []byte("name: backfill\n  namespace: shop\n"), 1))
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	plain := `apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {hookpace.dev/inject: enabled}}
---
apiVersion: v1
kind: Pod
metadata: {name: mailer-x1, namespace: shop}
spec: {containers: [{name: app, image: registry.example.com/mailer:1}]}
---
apiVersion: v1
kind: Pod
metadata: {name: opted-out, namespace: shop, labels: {hookpace.dev/inject: disabled}}
spec: {containers: [{name: app, image: registry.example.com/mailer:1}]}
---
apiVersion: v1
kind: Pod
metadata: {name: spark-driver, namespace: data, labels: {hookpace.dev/inject: enabled}}
spec: {containers: [{name: app, image: registry.example.com/spark:3}]}
---
apiVersion: v1
kind: Pod
metadata: {name: dns, namespace: kube-system, labels: {hookpace.dev/inject: enabled}}
spec: {containers: [{name: app, image: registry.example.com/dns:1}]}
---
apiVersion: v1
kind: Pod
metadata: {name: unrelated, namespace: data}
spec: {containers: [{name: app, image: registry.example.com/other:1}]}
`
	configMap := func(config string) string {
		return "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: hookpace, namespace: shop}\ndata:\n  config.yaml: |\n    " + config + "\n"
	}
	stream := string(oldWeb) + "---\n" + string(job) + "---\n" + plain
	run := func(stream string) []string {
		t.Helper()
		fs, err := Check(CheckOptions{Image: DefaultImage, ConfigMap: "hookpace"}, Input{Name: "cluster.yaml", R: strings.NewReader(stream)})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range fs {
			out = append(out, f.String())
		}
		return out
	}
	has := func(got []string, object, problem string) bool {
		return slices.ContainsFunc(got, func(l string) bool { return strings.Contains(l, object+":") && strings.Contains(l, problem) })
	}

	got := run(stream)
	for _, want := range []struct{ object, problem string }{
		{"Deployment/web (namespace shop)", "hookpace image reg/hookpace:0.1.0, expected " + DefaultImage},
		{"Deployment/web (namespace shop)", "3 replicas without knowing fleet mode"},
		{"Job/backfill (namespace shop)", "no hand-off target"},
		{"Pod/mailer-x1 (namespace shop)", "no hookpace container"},
		{"Pod/spark-driver (namespace data)", "no hookpace container"},
	} {
		if !has(got, want.object, want.problem) {
			t.Errorf("no finding %q for %s in:\n%s", want.problem, want.object, strings.Join(got, "\n"))
		}
	}
	if len(got) != 5 {
		t.Errorf("%d findings, want 5:\n%s", len(got), strings.Join(got, "\n"))
	}

	got = run(stream + configMap("shutdown: {timeout: 30s}"))
	if !has(got, "Deployment/web (namespace shop)", "3 replicas and no fleet.redis") || len(got) != 5 {
		t.Errorf("with a ConfigMap without fleet.redis:\n%s", strings.Join(got, "\n"))
	}
	got = run(stream + configMap("{fleet: {redis: 'redis://redis.shop:6379'}, shutdown: {handoff: 'http://gw:8080'}}"))
	if has(got, "Deployment/web", "replicas") || has(got, "Job/backfill", "hand-off") || len(got) != 3 {
		t.Errorf("with fleet.redis and a hand-off:\n%s", strings.Join(got, "\n"))
	}
}

// TestCheckAPIList: the API's own lists (a PodList, as GET /api/v1/pods
// answers) leave their items' kind out; Check reads them all the same.
func TestCheckAPIList(t *testing.T) {
	list := `{"kind":"PodList","apiVersion":"v1","items":[
	  {"metadata":{"name":"late","namespace":"shop","labels":{"hookpace.dev/inject":"enabled"}},"spec":{"containers":[{"name":"app","image":"a:1"}]}},
	  {"metadata":{"name":"plain","namespace":"shop"},"spec":{"containers":[{"name":"app","image":"a:1"}]}}]}`
	fs, err := Check(CheckOptions{Image: DefaultImage, ConfigMap: "hookpace"}, Input{Name: "pods.json", R: strings.NewReader(list)})
	if err != nil || len(fs) != 1 || !strings.Contains(fs[0].String(), "Pod/late (namespace shop)") {
		t.Errorf("%v %v", fs, err)
	}
}

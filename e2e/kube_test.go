package e2e

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"go/build"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/kubetest"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// resources maps a kind to its API path prefix and plural, and whether it
// lives in a namespace.
var resources = map[string]struct {
	prefix, plural string
	namespaced     bool
}{
	"Deployment": {"/apis/apps/v1", "deployments", true}, "StatefulSet": {"/apis/apps/v1", "statefulsets", true},
	"DaemonSet": {"/apis/apps/v1", "daemonsets", true}, "Job": {"/apis/batch/v1", "jobs", true},
	"CronJob": {"/apis/batch/v1", "cronjobs", true}, "Pod": {"/api/v1", "pods", true},
	"Service": {"/api/v1", "services", true}, "ConfigMap": {"/api/v1", "configmaps", true},
	"Secret": {"/api/v1", "secrets", true}, "ServiceAccount": {"/api/v1", "serviceaccounts", true},
	"Namespace":                    {"/api/v1", "namespaces", false},
	"PodDisruptionBudget":          {"/apis/policy/v1", "poddisruptionbudgets", true},
	"MutatingWebhookConfiguration": {"/apis/admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", false},
}

// objects splits a YAML stream into JSON objects, List items included.
func objects(t *testing.T, stream []byte) []map[string]any {
	t.Helper()
	r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var out []map[string]any
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		js, err := sigsyaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		var obj map[string]any
		json.Unmarshal(js, &obj)
		if obj == nil {
			continue
		}
		if items, ok := obj["items"].([]any); ok && strings.HasSuffix(obj["kind"].(string), "List") {
			for _, it := range items {
				out = append(out, it.(map[string]any))
			}
			continue
		}
		out = append(out, obj)
	}
}

// apply server-side applies obj in namespace ns (for namespaced kinds)
// with strict field validation; dryRun leaves nothing behind.
func apply(c *kubetest.Cluster, ns string, obj map[string]any, dryRun bool) (int, []byte) {
	kind := obj["kind"].(string)
	res, ok := resources[kind]
	if !ok {
		return 0, []byte("the test does not know kind " + kind)
	}
	meta := obj["metadata"].(map[string]any)
	path := res.prefix
	if res.namespaced {
		meta["namespace"] = ns
		path += "/namespaces/" + ns
	}
	path += "/" + res.plural + "/" + meta["name"].(string) + "?fieldManager=hookpace-e2e&fieldValidation=Strict&force=true"
	if dryRun {
		path += "&dryRun=All"
	}
	body, _ := json.Marshal(obj)
	code, b, err := c.Do("PATCH", path, "application/apply-patch+yaml", body)
	if err != nil {
		return 0, []byte(err.Error())
	}
	return code, b
}

func hookpaceCmd(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("hookpace %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.Bytes()
}

func namespace(t *testing.T, c *kubetest.Cluster, name string, labels map[string]string) {
	t.Helper()
	obj := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name, "labels": labels}}
	if code, b := apply(c, "", obj, false); code != 200 && code != 201 {
		t.Fatalf("namespace %s: %d %s", name, code, b)
	}
}

// TestKubeAPIServer: against a real kube-apiserver (and etcd), hookpace
// inject's output for every kind is accepted under strict field
// validation, the chart's objects in both modes are accepted, and the
// injector registered with the chart's MutatingWebhookConfiguration
// injects the Pods it should and no others, even while it is down.
func TestKubeAPIServer(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t)

	t.Run("inject output applies strictly", func(t *testing.T) {
		namespace(t, c, "apply", nil)
		namespace(t, c, "apply-new", nil)
		bad := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "typo"}, "dta": map[string]any{}}
		// Server-side apply refuses a field outside the schema (500 from this
		// version, with the field named).
		if code, b := apply(c, "apply", bad, true); code < 400 || !bytes.Contains(b, []byte(".dta")) {
			t.Fatalf("an unknown field: %d %s, want it refused: the validation is not strict", code, b)
		}
		sts, _ := os.ReadFile("../inject/testdata/statefulset.yaml")
		sts = bytes.Replace(sts, []byte("replicas: 1"), []byte("replicas: 2"), 1)
		for _, tc := range []struct {
			file  string
			input []byte
			flags []string
		}{
			{file: "deployment.yaml"},
			{file: "statefulset.yaml", input: sts, flags: []string{"--spool-volume-claim", "1Gi"}},
			{file: "cronjob.yaml", flags: []string{"--accept-loss"}},
			{file: "job.yaml", flags: []string{"--handoff-secret", "gw-hookpace"}},
			{file: "list.yaml", flags: []string{"--accept-loss"}},
			{file: "pod.yaml"},
		} {
			input := tc.input
			if input == nil {
				input, _ = os.ReadFile("../inject/testdata/" + tc.file)
			}
			v1 := hookpaceCmd(t, input, append([]string{"inject", "--image", "reg/hookpace:0.1.0"}, tc.flags...)...)
			v2 := hookpaceCmd(t, v1, append([]string{"inject", "--image", "reg/hookpace:0.2.0"}, tc.flags...)...)
			// The upgrade updates what the API lets change (a Job's template
			// and a Pod's spec don't: those are created anew).
			for i, out := range [][]byte{v1, v2} {
				for _, obj := range objects(t, out) {
					ns := "apply"
					if k := obj["kind"]; i == 1 && (k == "Job" || k == "Pod") {
						ns = "apply-new"
					}
					if code, b := apply(c, ns, obj, false); code != 200 && code != 201 {
						t.Errorf("%s (pass %d): %s/%v refused: %d %.600s", tc.file, i+1, obj["kind"], obj["metadata"].(map[string]any)["name"], code, b)
					}
				}
			}
		}
		// The claim template reached the API as inject wrote it.
		b := c.Must(200, "GET", "/apis/apps/v1/namespaces/apply/statefulsets/ledger", "", nil)
		if !bytes.Contains(b, []byte(`"name":"hookpace-spool"`)) || !bytes.Contains(b, []byte(`"storage":"1Gi"`)) || !bytes.Contains(b, []byte("reg/hookpace:0.2.0")) {
			t.Errorf("the StatefulSet as stored:\n%s", b)
		}
	})

	t.Run("chart objects", func(t *testing.T) {
		namespace(t, c, "chart", nil)
		for _, sets := range [][]string{{"mode=sidecar", "injector.enabled=true"}, {"mode=gateway"}} {
			args := []string{"template", "rel", "../charts/hookpace", "--namespace", "chart"}
			for _, s := range sets {
				args = append(args, "--set", s)
			}
			out, err := exec.Command(helmBin(t), args...).Output()
			if err != nil {
				t.Fatalf("helm %v: %v", args, err)
			}
			var injectorCA string // the injector Secret's ca.crt, as applied
			for _, obj := range objects(t, out) {
				if code, b := apply(c, "chart", obj, true); code != 200 && code != 201 {
					t.Errorf("%v: %s/%v refused: %d %s", sets, obj["kind"], obj["metadata"].(map[string]any)["name"], code, b)
				}
				if obj["kind"] == "Secret" && obj["metadata"].(map[string]any)["name"] == "rel-hookpace-injector-tls" {
					// Stored, as an earlier install of the release left it.
					meta := obj["metadata"].(map[string]any)
					meta["labels"].(map[string]any)["app.kubernetes.io/managed-by"] = "Helm"
					meta["annotations"] = map[string]any{"meta.helm.sh/release-name": "rel", "meta.helm.sh/release-namespace": "chart"}
					if code, b := apply(c, "chart", obj, false); code != 200 && code != 201 {
						t.Fatalf("the injector's Secret: %d %s", code, b)
					}
					injectorCA, _ = obj["data"].(map[string]any)["ca.crt"].(string)
				}
			}
			// helm's own check against the server: its lookups (the
			// injector's certificate, the gateway's users) and schema.
			args[0] = "install"
			args = append(args, "--dry-run=server", "--kubeconfig", c.Kubeconfig())
			out, err = exec.Command(helmBin(t), args...).CombinedOutput()
			if err != nil {
				t.Errorf("helm %v: %v\n%s", args, err, out)
			}
			// An upgrade keeps the injector's CA: the webhook's caBundle
			// and the Secret are the ones in the cluster (lookup), not new.
			if injectorCA != "" {
				if n := bytes.Count(out, []byte("caBundle: "+injectorCA+"\n")); n == 0 || n != bytes.Count(out, []byte("caBundle: ")) ||
					bytes.Count(out, []byte("ca.crt: "+injectorCA+"\n")) != 1 {
					t.Errorf("helm %v: the injector's CA of the cluster (%.120s) in %d caBundle: want it kept across an upgrade\n%s", args, injectorCA, n, out)
				}
			} else if slices.Contains(sets, "injector.enabled=true") {
				t.Errorf("%v: no injector Secret with a ca.crt in helm template's output", sets)
			}
		}
	})

	t.Run("injector", func(t *testing.T) {
		dir := t.TempDir()
		caPEM := serveCert(t, dir)
		port := kubetest.FreePort(t)
		// The chart's injector: its webhook configuration, pointed at this
		// injector, and its arguments (the release's inject flags), with
		// this test's address and certificate in place of the pod's.
		const image = "reg/hookpace:0.2.0"
		out, err := exec.Command(helmBin(t), "template", "rel", "../charts/hookpace", "--namespace", "hookpace-system",
			"--set", "injector.enabled=true", "--set", "hookpace.image="+image,
			"--set", "hookpace.shutdown.handoff=http://gw-hookpace.gw.svc.cluster.local:8080", "--set", "hookpace.shutdown.handoffSecret=gw-hookpace").Output()
		if err != nil {
			t.Fatal(err)
		}
		var mwc map[string]any
		var args []string
		for _, obj := range objects(t, out) {
			switch obj["kind"] {
			case "MutatingWebhookConfiguration":
				mwc = obj
			case "Deployment":
				for _, a := range obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["args"].([]any) {
					args = append(args, a.(string))
				}
			}
		}
		if mwc == nil || len(args) == 0 || args[0] != "injector" {
			t.Fatalf("the chart rendered no MutatingWebhookConfiguration or injector Deployment (args %v)", args)
		}
		stop := startInjector(t, dir, port, args)
		for _, w := range mwc["webhooks"].([]any) {
			cc := w.(map[string]any)["clientConfig"].(map[string]any)
			path := cc["service"].(map[string]any)["path"].(string)
			w.(map[string]any)["clientConfig"] = map[string]any{"url": fmt.Sprintf("https://127.0.0.1:%d%s", port, path), "caBundle": caPEM}
		}
		if code, b := apply(c, "", mwc, false); code != 200 && code != 201 {
			t.Fatalf("the webhook configuration: %d %s", code, b)
		}
		namespace(t, c, "hookpace-system", nil)
		namespace(t, c, "plain", nil)
		namespace(t, c, "opted-in", map[string]string{"hookpace.dev/inject": "enabled"})

		create := func(ns, name string, labels map[string]string) map[string]any {
			t.Helper()
			pod := map[string]any{"apiVersion": "v1", "kind": "Pod",
				"metadata": map[string]any{"name": name, "labels": labels},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "app", "image": "registry.example.com/app:1"}}}}
			body, _ := json.Marshal(pod)
			var got map[string]any
			// The webhook configuration takes a moment to reach the API server's informer.
			Poll(t, 20*time.Second, "pod "+ns+"/"+name+" created", func() bool {
				code, b, err := c.Do("POST", "/api/v1/namespaces/"+ns+"/pods", "", body)
				if err != nil || code != 201 {
					return false
				}
				json.Unmarshal(b, &got)
				return true
			})
			return got
		}
		injected := func(pod map[string]any) bool {
			inits, _ := pod["spec"].(map[string]any)["initContainers"].([]any)
			return len(inits) > 0 && inits[0].(map[string]any)["name"] == "hookpace"
		}
		enabled := map[string]string{"hookpace.dev/inject": "enabled"}
		// Wait until the webhook is in effect: a labelled pod is injected.
		var first map[string]any
		for i := 0; ; i++ {
			first = create("plain", fmt.Sprintf("labelled-%d", i), enabled)
			if injected(first) || i == 40*slack {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if !injected(first) {
			t.Fatalf("a labelled pod was not injected:\n%v", first)
		}
		if ann := first["metadata"].(map[string]any)["annotations"].(map[string]any); ann["hookpace.dev/injected"] != "v1" {
			t.Errorf("annotations %v", ann)
		}
		if b, _ := json.Marshal(first); !bytes.Contains(b, []byte(`"image":"`+image+`"`)) || !bytes.Contains(b, []byte(`"secretName":"gw-hookpace"`)) {
			t.Errorf("the chart's image and hand-off Secret are not in the injected pod:\n%s", b)
		}
		// A Job's pod: the release has a hand-off, so it is injected too.
		job := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "backfill-x1", "labels": enabled,
			"ownerReferences": []any{map[string]any{"apiVersion": "batch/v1", "kind": "Job", "name": "backfill", "uid": "0b7a3c9e-0000-4000-8000-000000000001"}}},
			"spec": map[string]any{"restartPolicy": "Never", "containers": []any{map[string]any{"name": "app", "image": "registry.example.com/backfill:3"}}}}
		body, _ := json.Marshal(job)
		if b := c.Must(201, "POST", "/api/v1/namespaces/plain/pods", "", body); !bytes.Contains(b, []byte(`"name":"hookpace"`)) {
			t.Errorf("a Job's pod with the release's hand-off was not injected:\n%s", b)
		}
		if p := create("plain", "unlabelled", nil); injected(p) {
			t.Errorf("an unlabelled pod in an unlabelled namespace was injected")
		}
		if p := create("opted-in", "by-namespace", nil); !injected(p) {
			t.Errorf("a pod of a labelled namespace was not injected")
		}
		if p := create("opted-in", "opted-out", map[string]string{"hookpace.dev/inject": "disabled"}); injected(p) {
			t.Errorf("a pod labelled disabled was injected")
		}
		if p := create("hookpace-system", "own", enabled); injected(p) {
			t.Errorf("a pod of the injector's namespace was injected")
		}

		// Pods made by controllers reach the injector the same way: the
		// API server calls it on every Pod CREATE, whoever sends it.
		// (kube-controller-manager is not built here: with kube-apiserver
		// it would take CI past its time.)

		stop()
		if p := create("plain", "while-down", nil); injected(p) {
			t.Errorf("injected while down?")
		}
		// failurePolicy Ignore (the chart's default): a labelled pod is created, without hookpace.
		if p := create("plain", "labelled-while-down", enabled); injected(p) {
			t.Errorf("injected while down?")
		}
		// hookpace check, on the cluster's own lists, finds that pod and no
		// other of its namespace.
		nsList := c.Must(200, "GET", "/api/v1/namespaces", "", nil)
		pods := c.Must(200, "GET", "/api/v1/namespaces/plain/pods", "", nil)
		check := exec.Command(binary, "check", "--image", image)
		check.Stdin = bytes.NewReader(append(append(nsList, "\n---\n"...), pods...))
		var checkErr bytes.Buffer
		check.Stderr = &checkErr
		report, err := check.Output()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !bytes.Contains(report, []byte("Pod/labelled-while-down (namespace plain): labelled for injection")) ||
			bytes.Count(report, []byte("labelled for injection")) != 1 {
			t.Errorf("hookpace check: %v\n%s%s", err, report, checkErr.String())
		}
	})
}

// startInjector runs hookpace injector on port until stop (or the test's end).
// args are the chart's; the flags added after them win.
func startInjector(t *testing.T, dir string, port int, args []string) (stop func()) {
	t.Helper()
	cmd := exec.Command(binary, append(args, "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--tls-cert", filepath.Join(dir, "tls.crt"), "--tls-key", filepath.Join(dir, "tls.key"), "--namespace", "hookpace-system")...)
	var logb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logb, &logb
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cmd.Process.Kill()
			cmd.Wait()
		}
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("injector's log:\n%s", logb.String())
		}
	})
	Poll(t, 20*time.Second, "the injector listening", func() bool {
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	return stop
}

// serveCert writes dir/tls.crt and tls.key for 127.0.0.1, signed by a new
// CA, and returns the CA's PEM.
func serveCert(t *testing.T, dir string) []byte {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e injector CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}

// helmBin finds helm on PATH or where go install puts it.
func helmBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	p := filepath.Join(build.Default.GOPATH, "bin", "helm")
	if _, err := os.Stat(p); err != nil {
		t.Fatal("helm not found: go install helm.sh/helm/v3/cmd/helm@v3.22.0 (.ci/run does)")
	}
	return p
}

package injector_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/cli"
	"github.com/hookpace/hookpace/inject"
	"github.com/hookpace/hookpace/injector"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	sigsyaml "sigs.k8s.io/yaml"
)

// pod is a Pod as the API server sends it for CREATE, with labels and
// annotations added.
func pod(labels, annotations string) []byte {
	return []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"web-5d8f-","namespace":"shop",` +
		`"labels":{"app":"web"` + labels + `},"annotations":{"team":"payments"` + annotations + `}},` +
		`"spec":{"containers":[{"name":"app","image":"registry.example.com/web:1","imagePullPolicy":"IfNotPresent",` +
		`"env":[{"name":"PORT","value":"3000"}],"resources":{},"terminationMessagePath":"/dev/termination-log"}],` +
		`"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst"}}`)
}

func server(t *testing.T) *httptest.Server {
	t.Helper()
	o := inject.Defaults()
	o.Image = "reg/hookpace:0.2.0"
	srv := httptest.NewTLSServer(injector.Handler(injector.Options{Inject: o, Namespace: "hookpace-system",
		SpoolDirs: []string{"/data/hookpace"}, SetOption: cli.InjectOption, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	return srv
}

// post sends an AdmissionReview for obj and returns the response.
func post(t *testing.T, srv *httptest.Server, path, namespace string, obj []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	ar := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: types.UID("7f0e8c3a-1111-4222-8333-444455556666"),
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: namespace, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: obj}},
	}
	body, _ := json.Marshal(ar)
	resp, err := srv.Client().Post(srv.URL+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	if out.Response.UID != ar.Request.UID || out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" {
		t.Errorf("response uid %q, %s %s", out.Response.UID, out.APIVersion, out.Kind)
	}
	return out.Response
}

// injected is hookpace inject's output for obj with o, as JSON.
func injected(t *testing.T, o inject.Options, obj []byte) []byte {
	t.Helper()
	in, err := inject.New(o)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := in.Inject(&out, io.Discard, inject.Input{Name: "pod", R: bytes.NewReader(obj)}); err != nil {
		t.Fatal(err)
	}
	js, err := sigsyaml.YAMLToJSON(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// applied is obj with resp's JSONPatch applied by a JSONPatch library.
func applied(t *testing.T, resp *admissionv1.AdmissionResponse, obj []byte) []byte {
	t.Helper()
	if !resp.Allowed || resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("response %+v: want allowed with a JSONPatch", resp)
	}
	p, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Apply(obj)
	if err != nil {
		t.Fatalf("applying %s: %v", resp.Patch, err)
	}
	return out
}

func sameJSON(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w any
	json.Unmarshal(got, &g)
	json.Unmarshal(want, &w)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("patched pod:\n%s\nhookpace inject gives:\n%s", got, want)
	}
}

// TestLabelledPod: a labelled Pod's patch, applied, is hookpace inject's
// output for it; options come from its annotations.
func TestLabelledPod(t *testing.T) {
	srv := server(t)
	o := inject.Defaults()
	o.Image = "reg/hookpace:0.2.0"
	obj := pod(`,"hookpace.dev/inject":"enabled"`, "")
	sameJSON(t, applied(t, post(t, srv, injector.PathLabel, "shop", obj), obj), injected(t, o, obj))

	obj = pod(`,"hookpace.dev/inject":"enabled"`, `,"hookpace.dev/java":"true","hookpace.dev/memory-limit":"256Mi","hookpace.dev/no-trust":"app"`)
	o.Java, o.MemoryLimit, o.NoTrust = true, "256Mi", []string{"app"}
	got := applied(t, post(t, srv, injector.PathLabel, "shop", obj), obj)
	sameJSON(t, got, injected(t, o, obj))
	if !strings.Contains(string(got), "JAVA_TOOL_OPTIONS") || strings.Contains(string(got), "SSL_CERT_FILE") || !strings.Contains(string(got), "256Mi") {
		t.Errorf("the annotations were not applied:\n%s", got)
	}
}

// TestNotInjected: an unlabelled Pod on the label path, a Pod in
// kube-system or the injector's namespace, a disabled Pod on the
// namespace path, and another operation are allowed with no patch.
func TestNotInjected(t *testing.T) {
	srv := server(t)
	for _, tc := range []struct {
		name, path, ns string
		obj            []byte
	}{
		{"unlabelled", injector.PathLabel, "shop", pod("", "")},
		{"labelled disabled", injector.PathLabel, "shop", pod(`,"hookpace.dev/inject":"disabled"`, "")},
		{"kube-system", injector.PathLabel, "kube-system", pod(`,"hookpace.dev/inject":"enabled"`, "")},
		{"own namespace", injector.PathNamespace, "hookpace-system", pod("", "")},
		{"namespace path, disabled", injector.PathNamespace, "shop", pod(`,"hookpace.dev/inject":"disabled"`, "")},
		{"injected by the CLI", injector.PathLabel, "shop", injected(t, inject.Defaults(), pod(`,"hookpace.dev/inject":"enabled"`, ""))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, srv, tc.path, tc.ns, tc.obj)
			if !resp.Allowed || len(resp.Patch) > 0 || resp.PatchType != nil {
				t.Errorf("%+v: want allowed, no patch", resp)
			}
		})
	}
	// The namespace path injects an unlabelled Pod: the namespaceSelector chose it.
	obj := pod("", "")
	o := inject.Defaults()
	o.Image = "reg/hookpace:0.2.0"
	sameJSON(t, applied(t, post(t, srv, injector.PathNamespace, "shop", obj), obj), injected(t, o, obj))
}

// TestRefused: bad annotations, a fixed option, and a Job's Pod without
// a hand-off are denied with a message that says why.
func TestRefused(t *testing.T) {
	srv := server(t)
	jobPod := bytes.Replace(pod(`,"hookpace.dev/inject":"enabled"`, ""), []byte(`"namespace":"shop",`),
		[]byte(`"namespace":"shop","ownerReferences":[{"apiVersion":"batch/v1","kind":"Job","name":"backfill","uid":"0b7a3c9e-0000-4000-8000-000000000001"}],`), 1)
	for _, tc := range []struct {
		name string
		obj  []byte
		want string
	}{
		{"unknown option", pod(`,"hookpace.dev/inject":"enabled"`, `,"hookpace.dev/jvm":"true"`), "hookpace.dev/jvm"},
		{"bad value", pod(`,"hookpace.dev/inject":"enabled"`, `,"hookpace.dev/memory-limit":"lots"`), "memory-limit"},
		{"image", pod(`,"hookpace.dev/inject":"enabled"`, `,"hookpace.dev/image":"evil/hookpace"`), "every pod"},
		{"capture image", pod(`,"hookpace.dev/inject":"enabled"`, `,"hookpace.dev/capture-image":"evil/iptables"`), "--capture-image applies to every pod"},
		{"spool dir", pod(`,"hookpace.dev/inject":"enabled"`, `,"hookpace.dev/spool-dir":"/etc"`), `"/etc" is not a spool directory the injector allows`},
		{"spool dir climbing", pod(`,"hookpace.dev/inject":"enabled"`, `,"hookpace.dev/spool-dir":"/data/hookpace/../../etc"`), "not a spool directory"},
		{"containers", bigPod(injector.MaxContainers+1, 1), "257 containers, more than the 256"},
		{"env", bigPod(4, injector.MaxEnv/4+1), "4100 env entries, more than the 4096"},
		{"job", jobPod, "--accept-loss"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, srv, injector.PathLabel, "shop", tc.obj)
			if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, tc.want) || resp.Result.Code != http.StatusForbidden {
				t.Errorf("%+v: want denied saying %q", resp.Result, tc.want)
			}
		})
	}
	allowed := pod(`,"hookpace.dev/inject":"enabled"`, `,"hookpace.dev/spool-dir":"/data/hookpace/"`)
	if resp := post(t, srv, injector.PathLabel, "shop", allowed); !resp.Allowed || !strings.Contains(string(resp.Patch), `"mountPath":"/data/hookpace"`) {
		t.Errorf("an allowed hookpace.dev/spool-dir: %+v %s", resp.Result, resp.Patch)
	}
	jobOK := bytes.Replace(jobPod, []byte(`"team":"payments"`), []byte(`"team":"payments","hookpace.dev/accept-loss":"true"`), 1)
	if resp := post(t, srv, injector.PathLabel, "shop", jobOK); !resp.Allowed || len(resp.Patch) == 0 {
		t.Errorf("a Job's pod with hookpace.dev/accept-loss: %+v", resp.Result)
	}
}

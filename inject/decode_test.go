package inject

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// object is one decoded document (or List item): its kind and name, and
// for a workload its pod template's metadata and spec.
type object struct {
	kind, name string
	obj        any
	meta       *metav1.ObjectMeta
	spec       *corev1.PodSpec
}

// decodeStrict splits a stream as kubectl does and decodes every document,
// and every List item, into its k8s.io/api type with unknown and
// duplicate fields rejected.
func decodeStrict(t *testing.T, stream []byte) []object {
	t.Helper()
	r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var objs []object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("splitting the output: %v", err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		js, err := sigsyaml.YAMLToJSONStrict(doc)
		if err != nil {
			t.Fatalf("document does not parse strictly: %v\n%s", err, doc)
		}
		if string(js) == "null" {
			continue // comments only
		}
		objs = append(objs, decodeJSON(t, js)...)
	}
	return objs
}

func decodeJSON(t *testing.T, js []byte) []object {
	t.Helper()
	var head struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(js, &head); err != nil {
		t.Fatal(err)
	}
	o := object{kind: head.Kind, name: head.Metadata.Name}
	switch head.Kind {
	case "Deployment":
		o.obj, o.meta, o.spec = template(func(v *appsv1.Deployment) *corev1.PodTemplateSpec { return &v.Spec.Template })
	case "StatefulSet":
		o.obj, o.meta, o.spec = template(func(v *appsv1.StatefulSet) *corev1.PodTemplateSpec { return &v.Spec.Template })
	case "DaemonSet":
		o.obj, o.meta, o.spec = template(func(v *appsv1.DaemonSet) *corev1.PodTemplateSpec { return &v.Spec.Template })
	case "Job":
		o.obj, o.meta, o.spec = template(func(v *batchv1.Job) *corev1.PodTemplateSpec { return &v.Spec.Template })
	case "CronJob":
		o.obj, o.meta, o.spec = template(func(v *batchv1.CronJob) *corev1.PodTemplateSpec { return &v.Spec.JobTemplate.Spec.Template })
	case "Pod":
		v := new(corev1.Pod)
		o.obj, o.meta, o.spec = v, &v.ObjectMeta, &v.Spec
	case "Service":
		o.obj = new(corev1.Service)
	case "ServiceAccount":
		o.obj = new(corev1.ServiceAccount)
	case "ConfigMap":
		o.obj = new(corev1.ConfigMap)
	case "List":
		var l corev1.List
		strictJSON(t, js, &l)
		var objs []object
		for _, it := range l.Items {
			objs = append(objs, decodeJSON(t, it.Raw)...)
		}
		return objs
	default:
		t.Fatalf("the test does not know kind %q", head.Kind)
	}
	strictJSON(t, js, o.obj)
	return []object{o}
}

// template makes a new T and points at its pod template's metadata and spec.
func template[T any](of func(*T) *corev1.PodTemplateSpec) (any, *metav1.ObjectMeta, *corev1.PodSpec) {
	v := new(T)
	p := of(v)
	return v, &p.ObjectMeta, &p.Spec
}

func strictJSON(t *testing.T, js []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%T does not decode strictly: %v\n%s", v, err, js)
	}
}

// injectBytes runs an Injector over input; log is what it reported.
func injectBytes(t *testing.T, o Options, input []byte) (out []byte, log string, err error) {
	t.Helper()
	in, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	var ob, lb bytes.Buffer
	err = in.Inject(&ob, &lb, Input{Name: "in.yaml", R: bytes.NewReader(input)})
	return ob.Bytes(), lb.String(), err
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func envValue(c corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

func hasListItem(list, item string) bool {
	for _, h := range strings.Split(list, ",") {
		if h == item {
			return true
		}
	}
	return false
}

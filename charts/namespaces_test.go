package charts

import (
	"strings"
	"testing"

	"github.com/hookpace/hookpace/injector"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// TestOneReleaseSeveralNamespaces: with sidecar.namespaces, one release
// renders the sidecars' ConfigMap into each listed namespace, with the
// same config, and its injector's webhooks select pods there alone,
// never in kube-system, the release's namespace or one not listed.
func TestOneReleaseSeveralNamespaces(t *testing.T) {
	out, err := helm(t, "template", "rel", chart, "--namespace", "hooks",
		"--set", "injector.enabled=true", "--set", "sidecar.namespaces={shop,billing}")
	if err != nil {
		t.Fatal(err)
	}
	configs := map[string]string{} // namespace -> config.yaml
	var mwc *admissionregistrationv1.MutatingWebhookConfiguration
	for _, doc := range strings.Split(out, "\n---\n") {
		var head struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("rendered document: %v\n%s", err, doc)
		}
		switch head.Kind {
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := yaml.UnmarshalStrict([]byte(doc), &cm); err != nil {
				t.Fatal(err)
			}
			if _, dup := configs[cm.Namespace]; dup || cm.Name != "hookpace" {
				t.Errorf("ConfigMap %s/%s rendered twice or misnamed", cm.Namespace, cm.Name)
			}
			configs[cm.Namespace] = cm.Data["config.yaml"]
		case "MutatingWebhookConfiguration":
			mwc = new(admissionregistrationv1.MutatingWebhookConfiguration)
			if err := yaml.UnmarshalStrict([]byte(doc), mwc); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(configs) != 2 || configs["shop"] == "" || configs["shop"] != configs["billing"] {
		t.Fatalf("ConfigMaps by namespace: %d (%v), want the same config in shop and billing", len(configs), keys(configs))
	}
	if mwc == nil || len(mwc.Webhooks) != 2 {
		t.Fatalf("webhook configuration: %+v", mwc)
	}
	enabled := func(ns string) labels.Set {
		return labels.Set{"kubernetes.io/metadata.name": ns, injector.LabelKey: injector.LabelEnabled}
	}
	for _, w := range mwc.Webhooks {
		sel, err := metav1.LabelSelectorAsSelector(w.NamespaceSelector)
		if err != nil {
			t.Fatalf("webhook %s: %v", w.Name, err)
		}
		for _, ns := range []string{"shop", "billing"} {
			if !sel.Matches(enabled(ns)) {
				t.Errorf("webhook %s does not select labelled namespace %s: %v", w.Name, ns, sel)
			}
		}
		for _, ns := range []string{"payments", "kube-system", "hooks"} {
			if sel.Matches(enabled(ns)) {
				t.Errorf("webhook %s selects namespace %s, not listed: %v", w.Name, ns, sel)
			}
		}
	}
	if n := notes(t, "injector.enabled=true", "sidecar.namespaces={shop,billing}"); !strings.Contains(n, "in namespaces shop, billing") ||
		!strings.Contains(n, "for those namespaces only") {
		t.Errorf("NOTES do not name the namespaces served:\n%s", n)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

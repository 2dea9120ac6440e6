package charts

import (
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/injector"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestInjectorChart: injector.enabled renders two replicas of hookpace
// injector with inject's flags for the release, a PDB over them, and a
// MutatingWebhookConfiguration whose two webhooks select labelled pods and
// labelled namespaces (never kube-system nor the release's), call the
// injector's paths, and trust a CA that signed the serving certificate for
// the Service's name.
func TestInjectorChart(t *testing.T) {
	r := render(t, "injector.enabled=true", "hookpace.image=reg/hookpace:0.2.0",
		"hookpace.shutdown.handoff=http://gw-hookpace.hooks.svc.cluster.local:8080", "injector.failurePolicy=Fail")
	name := "rel-hookpace-injector"
	d := get(t, r.deployments, name)
	if *d.Spec.Replicas != 2 {
		t.Errorf("replicas %d", *d.Spec.Replicas)
	}
	c := d.Spec.Template.Spec.Containers[0]
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"injector", "--tls-cert=", "--image reg/hookpace:0.2.0", "--handoff-configured"} {
		if !strings.Contains(args, want) {
			t.Errorf("injector args %q lack %q", args, want)
		}
	}
	if c.Image != "reg/hookpace:0.2.0" || d.Spec.Template.Labels[injector.LabelKey] != injector.LabelDisabled {
		t.Errorf("image %s, labels %v", c.Image, d.Spec.Template.Labels)
	}
	pdb := get(t, r.pdbs, name)
	sel, _ := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("PDB %+v does not keep one injector up", pdb.Spec)
	}
	svc := get(t, r.services, name)
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("Service selector %v", svc.Spec.Selector)
	}

	mwc := get(t, r.webhooks, name+"-hooks")
	if len(mwc.Webhooks) != 2 {
		t.Fatalf("%d webhooks", len(mwc.Webhooks))
	}
	tls := get(t, r.secrets, name+"-tls")
	for i, w := range mwc.Webhooks {
		path := []string{injector.PathLabel, injector.PathNamespace}[i]
		if w.ClientConfig.Service == nil || *w.ClientConfig.Service.Path != path || w.ClientConfig.Service.Name != name ||
			*w.FailurePolicy != admissionregistrationv1.Fail || *w.SideEffects != admissionregistrationv1.SideEffectClassNone {
			t.Errorf("webhook %s: %+v", w.Name, w)
		}
		ns, _ := metav1.LabelSelectorAsSelector(w.NamespaceSelector)
		obj, _ := metav1.LabelSelectorAsSelector(w.ObjectSelector)
		for _, excluded := range []string{"kube-system", "hooks"} {
			if ns.Matches(labels.Set{"kubernetes.io/metadata.name": excluded, injector.LabelKey: injector.LabelEnabled}) {
				t.Errorf("webhook %s selects namespace %s", w.Name, excluded)
			}
		}
		enabled := labels.Set{"app": "web", injector.LabelKey: injector.LabelEnabled}
		plain := labels.Set{"app": "web"}
		labelledNS := labels.Set{"kubernetes.io/metadata.name": "shop", injector.LabelKey: injector.LabelEnabled}
		plainNS := labels.Set{"kubernetes.io/metadata.name": "shop"}
		if i == 0 && (!obj.Matches(enabled) || obj.Matches(plain) || !ns.Matches(plainNS)) {
			t.Errorf("webhook %s: object selector %v, namespace selector %v", w.Name, obj, ns)
		}
		if i == 1 && (obj.Matches(enabled) || !obj.Matches(plain) || obj.Matches(labels.Set{injector.LabelKey: injector.LabelDisabled}) ||
			!ns.Matches(labelledNS) || ns.Matches(plainNS)) {
			t.Errorf("webhook %s: object selector %v, namespace selector %v", w.Name, obj, ns)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(w.ClientConfig.CABundle) {
			t.Fatalf("webhook %s: caBundle holds no certificate", w.Name)
		}
		block, _ := pem.Decode(tls.Data["tls.crt"])
		if block == nil {
			t.Fatal("tls.crt holds no certificate")
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: name + ".hooks.svc"}); err != nil {
			t.Errorf("the serving certificate does not verify for the Service: %v", err)
		}
	}
}

// TestInjectorNotes: with the injector, NOTES say how pods opt in and
// where their ConfigMap must be; without it, that the release runs nothing.
func TestInjectorNotes(t *testing.T) {
	n := notes(t, "injector.enabled=true")
	for _, want := range []string{"hookpace.dev/inject=enabled", "failurePolicy Ignore", "kubectl rollout restart", "hookpace inject -f deploy.yaml"} {
		if !strings.Contains(n, want) {
			t.Errorf("NOTES lack %q:\n%s", want, n)
		}
	}
	if n := notes(t); !strings.Contains(n, "It runs no workload") || strings.Contains(n, "hookpace.dev/inject") {
		t.Errorf("NOTES without the injector:\n%s", n)
	}
}

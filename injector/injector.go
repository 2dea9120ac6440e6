// Package injector is hookpace's mutating admission webhook: it answers
// AdmissionReview (v1) requests for Pods being created with a JSONPatch
// that adds to the Pod exactly what hookpace inject adds to it, through
// the same code.
//
// Two paths, each registered by its own webhook of the chart's
// MutatingWebhookConfiguration: PathLabel injects Pods labelled
// LabelKey=LabelEnabled (the webhook's objectSelector sends only those),
// PathNamespace injects every Pod it is sent (the webhook's
// namespaceSelector picked the namespace) unless it is labelled
// LabelKey=LabelDisabled. Neither touches a Pod in kube-system or in the
// injector's own namespace, whatever the configuration sends.
package injector

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/hookpace/hookpace/inject"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

const (
	PathLabel     = "/inject"
	PathNamespace = "/inject/namespace"

	// LabelKey on a Pod (or its namespace) asks for hookpace.
	LabelKey      = "hookpace.dev/inject"
	LabelEnabled  = "enabled"
	LabelDisabled = "disabled"

	// OptionPrefix starts a Pod annotation that sets one of inject's
	// flags for that Pod: hookpace.dev/java: "true",
	// hookpace.dev/memory-limit: 256Mi.
	OptionPrefix = "hookpace.dev/"

	maxReview = 4 << 20 // bytes of one AdmissionReview read

	// MaxContainers and MaxEnv bound the Pod the injector builds a patch
	// for (containers of every kind; env entries of them all): inject
	// holds the Pod as a YAML tree, whose memory and time grow with them.
	// A larger Pod is refused at once with the reason, so that one review
	// never takes the injector past its memory limit (with failurePolicy
	// Ignore, other Pods would be created without the sidecar meanwhile).
	MaxContainers = 256
	MaxEnv        = 4096
	// MaxPodBytes bounds the Pod's JSON for the same reason: long values
	// cost as many entries do.
	MaxPodBytes = 512 << 10
)

// fixed are inject's flags a Pod cannot set: the images are the
// cluster's choice (the capture init container runs as root with
// NET_ADMIN and NET_RAW), and the others edit what a Pod does not have
// (the ConfigMap, a StatefulSet's claim templates).
var fixed = []string{"image", "capture-image", "fleet-redis", "spool-volume-claim"}

// Options configure the webhook.
type Options struct {
	// Inject is what every Pod gets unless its annotations say otherwise.
	Inject inject.Options
	// Namespace is the injector's own: its Pods are never injected.
	Namespace string
	// SpoolDirs are the directories a Pod's hookpace.dev/spool-dir may
	// name, besides Inject.SpoolDir: the sidecar mounts its spool volume
	// there, in the Pod's own filesystem.
	SpoolDirs []string
	// SetOption sets inject's flag name to value in o, as the command
	// line would (an error for an unknown name or a bad value).
	SetOption func(o *inject.Options, name, value string) error
	Log       *slog.Logger
}

// Handler serves PathLabel and PathNamespace.
func Handler(o Options) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST "+PathLabel, review(o, false))
	mux.Handle("POST "+PathNamespace, review(o, true))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	return mux
}

// review answers one AdmissionReview.
func review(o Options, byNamespace bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ar admissionv1.AdmissionReview
		body, err := io.ReadAll(io.LimitReader(r.Body, maxReview))
		if err == nil {
			err = json.Unmarshal(body, &ar)
		}
		if err != nil || ar.Request == nil {
			http.Error(w, fmt.Sprintf("want an admission.k8s.io/v1 AdmissionReview with a request: %v", err), http.StatusBadRequest)
			return
		}
		req := ar.Request
		resp := o.decide(req, byNamespace)
		resp.UID = req.UID
		out := admissionv1.AdmissionReview{TypeMeta: ar.TypeMeta, Response: resp}
		if out.APIVersion == "" {
			out.APIVersion, out.Kind = "admission.k8s.io/v1", "AdmissionReview"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	})
}

// decide is the answer for one request, with one log line saying it.
func (o Options) decide(req *admissionv1.AdmissionRequest, byNamespace bool) *admissionv1.AdmissionResponse {
	pod := req.Name
	log := func(decision, why string, args ...any) {
		o.Log.Info("admission", append([]any{"namespace", req.Namespace, "pod", pod, "decision", decision, "reason", why}, args...)...)
	}
	allow := &admissionv1.AdmissionResponse{Allowed: true}
	if req.Kind.Kind != "Pod" || req.Kind.Group != "" || req.Operation != admissionv1.Create || req.SubResource != "" {
		log("skip", "not a Pod being created", "kind", req.Kind.Kind, "operation", req.Operation)
		return allow
	}
	var meta struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     podSize           `json:"spec"`
	}
	if err := json.Unmarshal(req.Object.Raw, &meta); err != nil {
		log("deny", "the Pod does not decode", "error", err)
		return deny(fmt.Sprintf("hookpace injector: the Pod does not decode: %v", err))
	}
	if pod == "" {
		pod = meta.Metadata.Name
	}
	if pod == "" {
		pod = meta.Metadata.GenerateName + "*"
	}
	label := meta.Metadata.Labels[LabelKey]
	switch {
	case req.Namespace == "kube-system" || req.Namespace == o.Namespace:
		log("skip", "namespace never injected")
		return allow
	case byNamespace && label == LabelDisabled:
		log("skip", LabelKey+"="+LabelDisabled)
		return allow
	case !byNamespace && label != LabelEnabled:
		log("skip", "not labelled "+LabelKey+"="+LabelEnabled)
		return allow
	}
	if meta.Metadata.Annotations[inject.Annotation] != "" {
		// Injected already (from a template hookpace inject wrote): the
		// manifest's owner chose those parts and upgrades them there.
		log("skip", "already injected ("+inject.Annotation+")")
		return allow
	}
	if why := meta.Spec.tooLarge(); why != "" {
		log("deny", "too large", "error", why)
		return deny("hookpace injector: " + why)
	}
	if n := len(req.Object.Raw); n > MaxPodBytes {
		why := fmt.Sprintf("the Pod is %d bytes of JSON, more than the %d the injector handles: inject it with hookpace inject, or leave it uninjected (label %s=%s)",
			n, MaxPodBytes, LabelKey, LabelDisabled)
		log("deny", "too large", "error", why)
		return deny("hookpace injector: " + why)
	}
	opts, err := o.options(meta.Metadata.Annotations)
	if err != nil {
		log("deny", "bad annotation", "error", err)
		return deny("hookpace injector: " + err.Error())
	}
	patch, msg, err := Patch(opts, req.Object.Raw)
	if err != nil {
		log("deny", "inject refused", "error", err)
		return deny("hookpace injector: " + err.Error())
	}
	if len(patch) == 0 {
		log("allow", msg)
		return allow
	}
	b, err := json.Marshal(patch)
	if err != nil {
		return deny("hookpace injector: " + err.Error())
	}
	pt := admissionv1.PatchTypeJSONPatch
	log("inject", msg, "operations", len(patch))
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: b, PatchType: &pt}
}

func deny(msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Status: metav1.StatusFailure, Message: msg, Code: http.StatusForbidden}}
}

// options are o.Inject with the Pod's option annotations applied.
func (o Options) options(annotations map[string]string) (inject.Options, error) {
	opts := o.Inject
	opts.NoProxy, opts.CIDRs, opts.NoTrust = slices.Clone(opts.NoProxy), slices.Clone(opts.CIDRs), slices.Clone(opts.NoTrust)
	var keys []string
	for k := range annotations {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		name, ok := strings.CutPrefix(k, OptionPrefix)
		if !ok || name == "inject" || name == strings.TrimPrefix(inject.Annotation, OptionPrefix) ||
			name == strings.TrimPrefix(inject.PartsAnnotation, OptionPrefix) {
			continue
		}
		if slices.Contains(fixed, name) {
			return opts, fmt.Errorf("annotation %s: the injector's --%s applies to every pod", k, name)
		}
		if err := o.SetOption(&opts, name, annotations[k]); err != nil {
			return opts, fmt.Errorf("annotation %s: %w", k, err)
		}
		if name == "spool-dir" {
			d := path.Clean(opts.SpoolDir)
			if d != path.Clean(o.Inject.SpoolDir) && !slices.Contains(o.SpoolDirs, d) {
				return opts, fmt.Errorf("annotation %s: %q is not a spool directory the injector allows (%s; the injector's --allow-spool-dir adds one)",
					k, annotations[k], strings.Join(append([]string{o.Inject.SpoolDir}, o.SpoolDirs...), ", "))
			}
			opts.SpoolDir = d
		}
	}
	return opts, nil
}

// podSize is what of a Pod's spec bounds the work of injecting it: its
// containers of every kind and their env entries, each decoded to
// nothing but its count.
type podSize struct {
	Containers          []sizedContainer `json:"containers"`
	InitContainers      []sizedContainer `json:"initContainers"`
	EphemeralContainers []sizedContainer `json:"ephemeralContainers"`
}

type sizedContainer struct {
	Env     []struct{} `json:"env"`
	EnvFrom []struct{} `json:"envFrom"`
}

// tooLarge says why the Pod is past MaxContainers or MaxEnv, or "".
func (p podSize) tooLarge() string {
	containers, env := 0, 0
	for _, cs := range [][]sizedContainer{p.Containers, p.InitContainers, p.EphemeralContainers} {
		containers += len(cs)
		for _, c := range cs {
			env += len(c.Env) + len(c.EnvFrom)
		}
	}
	switch {
	case containers > MaxContainers:
		return fmt.Sprintf("the Pod has %d containers, more than the %d the injector handles: inject it with hookpace inject, or leave it uninjected (label %s=%s)",
			containers, MaxContainers, LabelKey, LabelDisabled)
	case env > MaxEnv:
		return fmt.Sprintf("the Pod's containers have %d env entries, more than the %d the injector handles: inject it with hookpace inject, or leave it uninjected (label %s=%s)",
			env, MaxEnv, LabelKey, LabelDisabled)
	}
	return ""
}

// Patch is the JSONPatch that turns the Pod pod (JSON) into what
// hookpace inject with opts makes of it, and what inject said of it.
func Patch(opts inject.Options, pod []byte) ([]Op, string, error) {
	in, err := inject.New(opts)
	if err != nil {
		return nil, "", err
	}
	var out, log bytes.Buffer
	if err := in.Inject(&out, &log, inject.Input{Name: "admission", R: bytes.NewReader(pod)}); err != nil {
		return nil, "", err
	}
	js, err := sigsyaml.YAMLToJSON(out.Bytes())
	if err != nil {
		return nil, "", fmt.Errorf("inject's output: %w", err)
	}
	var before, after map[string]any
	if err := json.Unmarshal(pod, &before); err != nil {
		return nil, "", err
	}
	if err := json.Unmarshal(js, &after); err != nil {
		return nil, "", err
	}
	msg := strings.TrimSpace(log.String())
	msg = strings.TrimPrefix(msg[strings.LastIndex(msg, "\n")+1:], "admission: ")
	return diff(before, after), msg, nil
}

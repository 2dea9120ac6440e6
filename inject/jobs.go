package inject

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
)

// A Job's pods end: when its containers finish, the kubelet stops
// hookpace, which delivers what it can within shutdown.timeout and hands
// the rest to shutdown.handoff. Without a hand-off, what a partner's pace
// has not let through by then is lost with the emptyDir. So a Job, a
// CronJob or a Job's Pod is injected only with a hand-off target (in the
// ConfigMap among the manifests, or --handoff-secret, which goes with
// one) or with Options.AcceptLoss.

// isJob reports whether w's pods run to completion: a Job, a CronJob, or
// a Pod a Job owns (as the admission webhook sees them).
func (w workload) isJob() bool {
	switch w.kind {
	case "Job", "CronJob":
		return true
	case "Pod":
		for _, ref := range items(dig(w.obj, "metadata", "ownerReferences")) {
			if str(ref, "kind") == "Job" {
				return true
			}
		}
	}
	return false
}

// noteJob remembers w if it is a Job that needs a hand-off target.
func (in *Injector) noteJob(w workload) {
	if w.isJob() && !in.o.AcceptLoss && in.o.HandoffSecret == "" && !in.o.HandoffConfigured {
		in.jobs = append(in.jobs, w.name)
	}
}

// noteHandoff notes whether obj is hookpace's ConfigMap and its
// config.yaml sets shutdown.handoff.
func (in *Injector) noteHandoff(obj *yaml.Node) {
	if str(obj, "kind") != "ConfigMap" || str(dig(obj, "metadata"), "name") != in.o.ConfigMap {
		return
	}
	var cfg struct {
		Shutdown struct {
			Handoff string `yaml:"handoff"`
		} `yaml:"shutdown"`
	}
	if yaml.Unmarshal([]byte(str(get(obj, "data"), "config.yaml")), &cfg) == nil && cfg.Shutdown.Handoff != "" {
		in.handoff = true
	}
}

// jobsRefused is the error for the Jobs that have no hand-off target,
// once every manifest (and so the ConfigMap, if given) is read.
func (in *Injector) jobsRefused() error {
	if len(in.jobs) == 0 || in.handoff {
		return nil
	}
	return fmt.Errorf("%s: a Job's pod stops hookpace when its containers finish, and what the partners' pace has not "+
		"let through by then is lost with the emptyDir. Give a hand-off target: shutdown.handoff in the ConfigMap %q "+
		"(a gateway release's Service; add the ConfigMap with -f) with --handoff-secret, or pass --accept-loss",
		strings.Join(in.jobs, ", "), in.o.ConfigMap)
}

// claimTemplate is the StatefulSet volumeClaimTemplate that gives each
// pod a spool claim of its own.
func (in *Injector) claimTemplate() *yaml.Node {
	return toNode(map[string]any{
		"metadata": map[string]any{"name": SpoolVolume},
		"spec": map[string]any{
			"accessModes": []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			"resources":   map[string]any{"requests": corev1.ResourceList{corev1.ResourceStorage: *in.r.claim}},
		},
	}, "metadata", "spec")
}

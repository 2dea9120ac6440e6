package inject

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestSpoolVolumeClaim: a 2-replica StatefulSet gets a volumeClaimTemplate
// that is hookpace's spool, and no pod volume of that name; the output
// decodes strictly; uninject takes the template out again; any other
// kind is refused.
func TestSpoolVolumeClaim(t *testing.T) {
	input := bytes.Replace(readTestdata(t, "statefulset.yaml"), []byte("replicas: 1"), []byte("replicas: 2"), 1)
	o := Defaults()
	o.SpoolClaim = "1Gi"
	out, log, err := injectBytes(t, o, input)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	objs := decodeStrict(t, out)
	sts := objs[0].obj.(*appsv1.StatefulSet)
	var claim *corev1.PersistentVolumeClaim
	for i, c := range sts.Spec.VolumeClaimTemplates {
		if c.Name == SpoolVolume {
			claim = &sts.Spec.VolumeClaimTemplates[i]
		}
	}
	if len(sts.Spec.VolumeClaimTemplates) != 2 || claim == nil {
		t.Fatalf("volumeClaimTemplates %+v: want data and %s", sts.Spec.VolumeClaimTemplates, SpoolVolume)
	}
	if q := claim.Spec.Resources.Requests[corev1.ResourceStorage]; q.Cmp(resource.MustParse("1Gi")) != 0 ||
		!reflect.DeepEqual(claim.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
		t.Errorf("claim %+v", claim.Spec)
	}
	spec := sts.Spec.Template.Spec
	for _, v := range spec.Volumes {
		if v.Name == SpoolVolume {
			t.Errorf("a pod volume %+v shadows the claim template", v)
		}
	}
	hp := spec.InitContainers[0]
	mounted := false
	for _, m := range hp.VolumeMounts {
		mounted = mounted || m.Name == SpoolVolume && m.MountPath == o.SpoolDir
	}
	if hp.Name != ContainerName || !mounted {
		t.Errorf("hookpace %q mounts %+v: want %s at %s", hp.Name, hp.VolumeMounts, SpoolVolume, o.SpoolDir)
	}
	if spec.SecurityContext == nil || spec.SecurityContext.FSGroup == nil || *spec.SecurityContext.FSGroup != nonRootID {
		t.Errorf("pod securityContext %+v: the claim must be writable by hookpace", spec.SecurityContext)
	}
	if again, _, err := injectBytes(t, o, out); err != nil || !bytes.Equal(again, out) {
		t.Errorf("injected again: %v\n%s", err, again)
	}
	back, log, err := uninjectBytes(t, out)
	if err != nil || !reflect.DeepEqual(generic(t, back), generic(t, input)) {
		t.Errorf("uninject: %v %s\n%s", err, log, back)
	}

	_, _, err = injectBytes(t, o, []byte(deployment(appContainer)))
	if err == nil || !strings.Contains(err.Error(), "Deployment/web") || !strings.Contains(err.Error(), "only a StatefulSet") {
		t.Errorf("a Deployment with --spool-volume-claim: %v", err)
	}
	o.SpoolPVC = "x"
	if _, err := New(o); err == nil {
		t.Errorf("--spool-volume-claim with --spool-pvc accepted")
	}
}

// TestJobsNeedAHandoff: a Job, a CronJob or a Job's Pod is refused with
// neither a hand-off target nor AcceptLoss, saying why; the ConfigMap
// among the manifests with shutdown.handoff, before or after the Job,
// --handoff-secret or AcceptLoss let it through.
func TestJobsNeedAHandoff(t *testing.T) {
	jobPod := `apiVersion: v1
kind: Pod
metadata:
  name: backfill-x7k2p
  ownerReferences: [{apiVersion: batch/v1, kind: Job, name: backfill, uid: 0b7a3c9e-0000-4000-8000-000000000001}]
spec:
  restartPolicy: Never
  containers: [{name: app, image: registry.example.com/backfill:3}]
`
	configMap := `apiVersion: v1
kind: ConfigMap
metadata: {name: hookpace}
data:
  config.yaml: |
    shutdown:
      handoff: http://hooks-hookpace-gateway:8080
`
	for _, tc := range []struct {
		name, input string
		opts        func(*Options)
		refused     string // "" = injected
	}{
		{"job", string(readTestdata(t, "job.yaml")), nil, "Job/backfill"},
		{"cronjob", string(readTestdata(t, "cronjob.yaml")), nil, "CronJob/nightly-invoices"},
		{"job's pod", jobPod, nil, "Pod/backfill-x7k2p"},
		{"configmap after", string(readTestdata(t, "job.yaml")) + "\n---\n" + configMap, nil, ""},
		{"configmap before", configMap + "---\n" + jobPod, nil, ""},
		{"handoff secret", jobPod, func(o *Options) { o.HandoffSecret = "handoff" }, ""},
		{"accept loss", string(readTestdata(t, "cronjob.yaml")), func(o *Options) { o.AcceptLoss = true }, ""},
		{"plain pod", strings.Replace(jobPod, "kind: Job", "kind: ReplicaSet", 1), nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Defaults()
			if tc.opts != nil {
				tc.opts(&o)
			}
			out, log, err := injectBytes(t, o, []byte(tc.input))
			if tc.refused == "" {
				if err != nil || !strings.Contains(string(out), "name: hookpace") {
					t.Errorf("refused: %v\n%s", err, log)
				}
				return
			}
			if err == nil || len(out) > 0 {
				t.Fatalf("injected, want refused:\n%s", out)
			}
			for _, want := range []string{tc.refused, "lost", "shutdown.handoff", "--accept-loss"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal does not say %q: %v", want, err)
				}
			}
		})
	}
}

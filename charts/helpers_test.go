package charts

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func sprint(v any) string { return fmt.Sprintf("%+v", v) }

func checkExecProbe(t *testing.T, name string, p *corev1.Probe, args ...string) {
	t.Helper()
	if p == nil || p.Exec == nil {
		t.Errorf("%s probe = %+v, want an exec probe", name, p)
		return
	}
	cmd := p.Exec.Command
	if len(cmd) == 0 || cmd[0] != "/usr/local/bin/hookpace" {
		t.Errorf("%s probe runs %v", name, cmd)
	}
	for _, a := range args {
		if !slices.Contains(cmd, a) {
			t.Errorf("%s probe %v lacks %q", name, cmd, a)
		}
	}
}

func volume(t *testing.T, vols []corev1.Volume, name string) corev1.Volume {
	t.Helper()
	for _, v := range vols {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no volume %q in %+v", name, vols)
	return corev1.Volume{}
}

func checkMount(t *testing.T, c corev1.Container, name, path string) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.Name == name {
			if m.MountPath != path {
				t.Errorf("%s mounts %s at %s, want %s", c.Name, name, m.MountPath, path)
			}
			return
		}
	}
	t.Errorf("%s does not mount %s", c.Name, name)
}

// subset reports whether every label of sel is in labels.
func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

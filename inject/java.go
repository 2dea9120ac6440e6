package inject

import (
	"strings"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
)

// javaVar is the variable every JVM reads its extra options from. Images
// and manifests often set it already (-XX:MaxRAMPercentage=75): inject
// keeps theirs and appends its own, later options winning in the JVM.
const javaVar = "JAVA_TOOL_OPTIONS"

// JavaOriginalVar holds a container's own JAVA_TOOL_OPTIONS when that came
// from a ConfigMap or Secret (valueFrom): the new JAVA_TOOL_OPTIONS is
// "$(JavaOriginalVar) hookpace's options", which the kubelet expands.
const JavaOriginalVar = "HOOKPACE_APP_JAVA_TOOL_OPTIONS"

// mergeJava puts hookpace's options (ours) into the JAVA_TOOL_OPTIONS of
// the container whose env list is env. With none there it returns ours to
// append. With a literal value there it appends ours to that value in
// place (kept, nothing to add). With a valueFrom there it renames that
// entry JavaOriginalVar and returns an entry that references it.
func mergeJava(env *yaml.Node, ours corev1.EnvVar) (add *corev1.EnvVar, kept bool) {
	for _, e := range items(env) {
		if str(e, "name") != javaVar {
			continue
		}
		if get(e, "valueFrom") != nil {
			set(e, "name", scalar(JavaOriginalVar), "")
			return &corev1.EnvVar{Name: javaVar, Value: "$(" + JavaOriginalVar + ") " + ours.Value}, true
		}
		v := strings.TrimSpace(str(e, "value"))
		if v != "" {
			v += " "
		}
		set(e, "value", scalar(v+ours.Value), "")
		return nil, true
	}
	return &ours, false
}

// javaEntry is the JAVA_TOOL_OPTIONS entry of the env list env, or nil.
func javaEntry(env *yaml.Node) *yaml.Node {
	for _, e := range items(env) {
		if str(e, "name") == javaVar {
			return e
		}
	}
	return nil
}

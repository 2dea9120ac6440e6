package inject

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"gopkg.in/yaml.v3"
)

// PartsAnnotation records, next to Annotation, what inject added to a pod
// template that it cannot tell from its own names: the variables and
// mounts it put on the app's containers, the fields it created, and the
// values it changed. Uninject and a re-inject take exactly these parts
// out again, so the user's own edits made after injecting stay.
const PartsAnnotation = "hookpace.dev/injected-parts"

// ourVolumes are the pod volumes inject adds, by name.
var ourVolumes = []string{SpoolVolume, ConfigVolume, HandoffVolume, TokenVolume, InboundSecretVolume}

// record is PartsAnnotation's value, as JSON.
type record struct {
	Env     map[string][]string `json:"env,omitempty"`     // container → the variables inject added to it
	Mounts  []string            `json:"mounts,omitempty"`  // containers given the trust mount
	Created []string            `json:"created,omitempty"` // fields inject added (see fieldsMade)
	Grace   *string             `json:"grace,omitempty"`   // terminationGracePeriodSeconds before inject set it; "" = unset
	FSGroup bool                `json:"fsGroup,omitempty"` // inject set securityContext.fsGroup
	Claim   string              `json:"claim,omitempty"`   // the StatefulSet volumeClaimTemplate inject added
	// The app's own JAVA_TOOL_OPTIONS that inject appended its options
	// to: container → the value before (a literal), and the containers
	// whose valueFrom entry it renamed JavaOriginalVar.
	Java     map[string]string `json:"java,omitempty"`
	JavaFrom []string          `json:"javaFrom,omitempty"`
}

// field is a place inject may create a field in: a mapping and the key.
type field struct {
	id  string // as record.Created names it
	m   *yaml.Node
	key string
}

// fieldsMade are the fields inject creates when absent: the pod template's
// metadata and annotations, the pod's init containers, volumes and
// securityContext, the StatefulSet's volumeClaimTemplates, and each
// target container's env and volumeMounts.
func fieldsMade(w workload, containers []*yaml.Node) []field {
	meta := get(w.holder, "metadata")
	fs := []field{{"metadata", w.holder, "metadata"}, {"annotations", meta, "annotations"},
		{"initContainers", w.spec, "initContainers"}, {"volumes", w.spec, "volumes"},
		{"securityContext", w.spec, "securityContext"}}
	if w.kind == "StatefulSet" {
		fs = append(fs, field{"volumeClaimTemplates", get(w.obj, "spec"), "volumeClaimTemplates"})
	}
	for _, c := range containers {
		n := str(c, "name")
		fs = append(fs, field{n + "/env", c, "env"}, field{n + "/volumeMounts", c, "volumeMounts"})
	}
	return fs
}

// absent reports whether f is missing (or null) in its mapping.
func (f field) absent() bool {
	v := get(f.m, f.key)
	return v == nil || isNull(v)
}

// newRecord notes, before inject changes w, what it will add to the
// targets and which of the fields it may create are absent.
func (in *Injector) newRecord(w workload, targets []target, grace int64) record {
	r := record{Env: map[string][]string{}}
	var cs []*yaml.Node
	for _, t := range targets {
		cs = append(cs, t.c)
		for _, e := range in.appEnv(t.trust) {
			if e.Name == javaVar {
				if own := javaEntry(get(t.c, "env")); own != nil && get(own, "valueFrom") == nil {
					if r.Java == nil {
						r.Java = map[string]string{}
					}
					r.Java[t.name] = str(own, "value") // appended to in place, not added
					continue
				} else if own != nil {
					r.JavaFrom = append(r.JavaFrom, t.name)
				}
			}
			r.Env[t.name] = append(r.Env[t.name], e.Name)
		}
		if t.trust {
			r.Mounts = append(r.Mounts, t.name)
		}
	}
	for _, f := range fieldsMade(w, cs) {
		if f.absent() {
			r.Created = append(r.Created, f.id)
		}
	}
	if grace > 0 {
		was := ""
		if g := get(w.spec, "terminationGracePeriodSeconds"); g != nil && !isNull(g) {
			was = g.Value
		}
		r.Grace = &was
	}
	if (in.o.SpoolPVC != "" || in.o.SpoolClaim != "") && get(get(w.spec, "securityContext"), "fsGroup") == nil {
		r.FSGroup = true
	}
	return r
}

// annotate writes r into w's pod template annotations.
func (r record) annotate(w workload) {
	b, err := json.Marshal(r)
	if err != nil {
		panic("inject: " + err.Error()) // a struct of strings
	}
	meta := child(w.holder, "metadata", yaml.MappingNode, "spec")
	set(child(meta, "annotations", yaml.MappingNode, ""), PartsAnnotation, scalar(string(b)), "")
}

// takeOut takes out of w what inject added, as its record says; it changes
// nothing and returns an error if w has no record it can read.
func takeOut(w workload) error {
	anns := dig(w.holder, "metadata", "annotations")
	raw := str(anns, PartsAnnotation)
	if raw == "" {
		return fmt.Errorf("%s: injected without %s (by an older hookpace), so what it added cannot be told from the app's own: inject the original manifest", w.name, PartsAnnotation)
	}
	var r record
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return fmt.Errorf("%s: %s: %w", w.name, PartsAnnotation, err)
	}
	drop(get(w.spec, "initContainers"), func(c *yaml.Node) bool {
		return str(c, "name") == ContainerName || str(c, "name") == CaptureContainerName
	})
	drop(get(w.spec, "volumes"), func(v *yaml.Node) bool { return slices.Contains(ourVolumes, str(v, "name")) })
	if r.Claim != "" {
		drop(dig(w.obj, "spec", "volumeClaimTemplates"), func(v *yaml.Node) bool { return str(dig(v, "metadata"), "name") == r.Claim })
	}
	var cs []*yaml.Node
	for _, key := range []string{"containers", "initContainers"} {
		for _, c := range items(get(w.spec, key)) {
			cs = append(cs, c)
			n := str(c, "name")
			drop(get(c, "env"), func(e *yaml.Node) bool { return slices.Contains(r.Env[n], str(e, "name")) })
			if was, ok := r.Java[n]; ok {
				if e := javaEntry(get(c, "env")); e != nil {
					set(e, "value", scalar(was), "")
				}
			}
			if slices.Contains(r.JavaFrom, n) {
				for _, e := range items(get(c, "env")) {
					if str(e, "name") == JavaOriginalVar {
						set(e, "name", scalar(javaVar), "")
					}
				}
			}
			if slices.Contains(r.Mounts, n) {
				drop(get(c, "volumeMounts"), func(m *yaml.Node) bool { return str(m, "name") == SpoolVolume && str(m, "mountPath") == TrustDir })
			}
		}
	}
	if r.Grace != nil {
		if *r.Grace == "" {
			del(w.spec, "terminationGracePeriodSeconds")
		} else {
			set(w.spec, "terminationGracePeriodSeconds", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: *r.Grace}, "")
		}
	}
	if r.FSGroup {
		del(get(w.spec, "securityContext"), "fsGroup")
	}
	del(anns, Annotation)
	del(anns, PartsAnnotation)
	// Innermost first: annotations before the metadata that holds them.
	fs := fieldsMade(w, cs)
	slices.Reverse(fs)
	for _, f := range fs {
		if v := get(f.m, f.key); v != nil && len(v.Content) == 0 && v.Kind != yaml.ScalarNode && slices.Contains(r.Created, f.id) {
			del(f.m, f.key)
		}
	}
	return nil
}

// drop removes the items of seq for which gone is true.
func drop(seq *yaml.Node, gone func(*yaml.Node) bool) {
	if seq == nil || seq.Kind != yaml.SequenceNode {
		return
	}
	seq.Content = slices.DeleteFunc(seq.Content, gone)
}

// del removes key from mapping m.
func del(m *yaml.Node, key string) {
	if m == nil || m.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = slices.Delete(m.Content, i, i+2)
			return
		}
	}
}

// reinject replaces what inject added to w before with what in adds now.
// With the options of the first time, w comes out as it was.
func (in *Injector) reinject(w workload) (string, error) {
	before, err := yaml.Marshal(w.obj)
	if err != nil {
		return "", fmt.Errorf("%s: %w", w.name, err)
	}
	if err := takeOut(w); err != nil {
		return "", err
	}
	msg, err := in.workload(w)
	if err != nil {
		return "", err
	}
	after, err := yaml.Marshal(w.obj)
	if err != nil {
		return "", fmt.Errorf("%s: %w", w.name, err)
	}
	if bytes.Equal(before, after) {
		return "already injected (" + Annotation + "), unchanged", nil
	}
	return "re-injected, hookpace's parts replaced: " + msg, nil
}

// Uninject reads every document of the inputs and writes them, as one
// stream, to out, with what inject added to each pod template taken out;
// log gets a line per object. ConfigMaps are left as they are: what
// --fleet-redis set there is configuration, not part of a pod. If any
// object's record cannot be read, out gets nothing.
func Uninject(out, log io.Writer, inputs ...Input) error {
	return stream(out, log, inputs, func(root *yaml.Node, where string) error {
		return visit(root, where, func(obj *yaml.Node, name string) error {
			if str(obj, "kind") == "Service" {
				msg, err := serviceBack(obj, name)
				if msg == "" {
					msg = "not a workload, unchanged"
				}
				if err == nil {
					fmt.Fprintf(log, "%s: %s\n", name, msg)
				}
				return err
			}
			w, ok, err := asWorkload(obj, name)
			if err != nil {
				return err
			}
			msg := "not a workload, unchanged"
			if ok {
				if msg, err = uninject(w); err != nil {
					return err
				}
			}
			fmt.Fprintf(log, "%s: %s\n", name, msg)
			return nil
		})
	}, nil)
}

// uninject takes hookpace out of w.
func uninject(w workload) (string, error) {
	switch v := str(dig(w.holder, "metadata", "annotations"), Annotation); {
	case v == "":
		return "not injected, unchanged", nil
	case v != Format:
		return "", fmt.Errorf("%s: injected in format %q, this hookpace reads %q", w.name, v, Format)
	}
	if err := takeOut(w); err != nil {
		return "", err
	}
	return "hookpace removed", nil
}

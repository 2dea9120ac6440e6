package inject

import (
	"fmt"
	"io"
	"slices"
	"strconv"

	"gopkg.in/yaml.v3"
)

// CheckOptions say what Check expects of a cluster's manifests.
type CheckOptions struct {
	Image     string // the sidecar image every injected pod should run
	ConfigMap string // hookpace's ConfigMap (fleet.redis, shutdown.handoff)
}

// Finding is one problem Check found with one object.
type Finding struct {
	Object  string // "deploy.yaml: Deployment/web (namespace shop)"
	Problem string
}

func (f Finding) String() string { return f.Object + ": " + f.Problem }

// podObject is what Check keeps of one object with pods.
type podObject struct {
	name, kind, ns string
	labels         map[string]string
	injected       bool   // has the hookpace container
	image          string // its image
	handoffMount   bool   // mounts the hand-off Secret
	replicas       int    // pods at once; 0 = one per node
	job            bool
}

// hookpaceConfig is what Check reads from a ConfigMap's config.yaml.
type hookpaceConfig struct {
	Fleet struct {
		Redis    string   `yaml:"redis"`
		Cluster  []string `yaml:"cluster"`
		Sentinel any      `yaml:"sentinel"`
	} `yaml:"fleet"`
	Shutdown struct {
		Handoff string `yaml:"handoff"`
	} `yaml:"shutdown"`
}

// Check reads manifests (files, stdin, or a cluster's objects as kubectl
// get -o yaml exports them) and reports: pods whose hookpace image is not
// o.Image; pods labelled for injection (or in a namespace so labelled)
// without hookpace; injected workloads of more than one pod without fleet
// mode; injected Jobs without a hand-off target.
func Check(o CheckOptions, inputs ...Input) ([]Finding, error) {
	var objs []podObject
	nsLabels := map[string]map[string]string{}
	configs := map[string]*hookpaceConfig{} // by namespace
	err := stream(io.Discard, io.Discard, inputs, func(root *yaml.Node, where string) error {
		return visit(root, where, func(obj *yaml.Node, name string) error {
			meta := get(obj, "metadata")
			ns := str(meta, "namespace")
			switch kind := str(obj, "kind"); {
			case kind == "Namespace":
				nsLabels[str(meta, "name")] = stringMap(get(meta, "labels"))
				return nil
			case kind == "ConfigMap" && str(meta, "name") == o.ConfigMap:
				var c hookpaceConfig
				if err := yaml.Unmarshal([]byte(str(get(obj, "data"), "config.yaml")), &c); err != nil {
					return fmt.Errorf("%s: config.yaml: %w", name, err)
				}
				configs[ns] = &c
				return nil
			}
			if p, ok := checkObject(obj, name); ok {
				objs = append(objs, p)
			}
			return nil
		})
	}, nil)
	if err != nil {
		return nil, err
	}
	var fs []Finding
	for _, p := range objs {
		add := func(format string, args ...any) { fs = append(fs, Finding{p.name, fmt.Sprintf(format, args...)}) }
		if !p.injected {
			nsl := nsLabels[p.ns]
			wanted := p.labels["hookpace.dev/inject"] == "enabled" ||
				nsl["hookpace.dev/inject"] == "enabled" && p.labels["hookpace.dev/inject"] != "disabled"
			if wanted && p.ns != "kube-system" {
				add("labelled for injection (hookpace.dev/inject) but has no hookpace container: created while the injector was down (failurePolicy Ignore) or before it was installed; re-create it (kubectl rollout restart)")
			}
			continue
		}
		if p.image != o.Image {
			add("hookpace image %s, expected %s: re-inject (hookpace inject --image) or roll it (kubectl rollout restart)", p.image, o.Image)
		}
		c, known := configs[p.ns]
		if !known && len(configs) == 1 && configs[""] != nil {
			c, known = configs[""], true
		}
		if p.replicas != 1 {
			switch {
			case !known:
				add("%s without knowing fleet mode: the ConfigMap %q of its namespace is not among the manifests", pods(p.replicas), o.ConfigMap)
			case c.Fleet.Redis == "" && len(c.Fleet.Cluster) == 0 && c.Fleet.Sentinel == nil:
				add("%s and no fleet.redis in the ConfigMap %q: each pod paces alone, so a partner's limit multiplies by the pods", pods(p.replicas), o.ConfigMap)
			}
		}
		if p.job && !p.handoffMount && (!known || c.Shutdown.Handoff == "") {
			add("a Job's pods with no hand-off target (shutdown.handoff in the ConfigMap %q): what is queued when its containers finish is lost", o.ConfigMap)
		}
	}
	return fs, nil
}

func pods(n int) string {
	if n == 0 {
		return "one pod per node"
	}
	return strconv.Itoa(n) + " replicas"
}

// checkObject reads an object with pods; false if it has none.
func checkObject(obj *yaml.Node, name string) (podObject, bool) {
	kind := str(obj, "kind")
	keys, ok := podSpecPath[kind]
	if kind == "ReplicaSet" {
		keys, ok = []string{"spec", "template", "spec"}, true
	}
	if !ok {
		return podObject{}, false
	}
	holder := obj
	if len(keys) > 1 {
		holder = dig(obj, keys[:len(keys)-1]...)
	}
	spec := get(holder, "spec")
	w := workload{name: name, kind: kind, obj: obj, holder: holder, spec: spec}
	p := podObject{name: name, kind: kind, ns: str(dig(obj, "metadata"), "namespace"),
		labels: stringMap(dig(holder, "metadata", "labels")), replicas: 1, job: w.isJob()}
	if kind == "ReplicaSet" {
		kind = "Deployment" // the same replicas field
	}
	if n, known := (workload{kind: kind, obj: obj}).replicas(); !known {
		p.replicas = 0
	} else {
		p.replicas = n
	}
	for _, key := range []string{"initContainers", "containers"} {
		for _, c := range items(get(spec, key)) {
			if str(c, "name") == ContainerName {
				p.injected, p.image = true, str(c, "image")
				p.handoffMount = slices.ContainsFunc(items(get(c, "volumeMounts")), func(m *yaml.Node) bool { return str(m, "name") == HandoffVolume })
			}
		}
	}
	return p, true
}

// stringMap is a mapping of scalars.
func stringMap(m *yaml.Node) map[string]string {
	out := map[string]string{}
	if m == nil || m.Kind != yaml.MappingNode {
		return out
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		out[m.Content[i].Value] = m.Content[i+1].Value
	}
	return out
}

package inject

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
)

// workload is one object with a pod template.
type workload struct {
	name   string     // for messages: "deploy.yaml: Deployment/web"
	kind   string     // its kind
	obj    *yaml.Node // the object
	holder *yaml.Node // the mapping with the pod's metadata and spec (the object itself for a Pod)
	spec   *yaml.Node // the pod spec
}

// target is an app container that gets the variables.
type target struct {
	c     *yaml.Node
	name  string
	trust bool
}

// workload injects w's pod template, or says why not. It changes nothing
// unless every check passes.
func (in *Injector) workload(w workload) (string, error) {
	if v := str(dig(w.holder, "metadata", "annotations"), Annotation); v != "" {
		if v != Format {
			return "", fmt.Errorf("%s: injected in format %q, this hookpace writes %q: inject the original manifest", w.name, v, Format)
		}
		return in.reinject(w)
	}
	targets := in.targets(w.spec)
	grace, err := in.check(w, targets)
	if err != nil {
		return "", err
	}
	rec := in.newRecord(w, targets, grace)

	if grace > 0 {
		set(w.spec, "terminationGracePeriodSeconds", intScalar(grace), "containers")
	}
	inits := child(w.spec, "initContainers", yaml.SequenceNode, "containers")
	inits.Content = slices.Insert(inits.Content, 0, in.sidecar()) // first: the app's other init containers may send too
	if in.o.Capture {
		// Before the sidecar: the rules are in place before any container
		// that may send starts (hookpace's own uid is excluded anyway).
		inits.Content = slices.Insert(inits.Content, 0, in.captureInit())
		in.capture.pods++
	}
	vols := child(w.spec, "volumes", yaml.SequenceNode, "")
	vols.Content = append(vols.Content, in.volumes()...)
	if in.o.SpoolClaim != "" {
		claims := child(get(w.obj, "spec"), "volumeClaimTemplates", yaml.SequenceNode, "")
		claims.Content = append(claims.Content, in.claimTemplate())
		rec.Claim = SpoolVolume
	}
	var plain, noTrust, javaKept []string
	for _, t := range targets {
		env := child(t.c, "env", yaml.SequenceNode, "")
		for _, e := range in.appEnv(t.trust) {
			if e.Name == javaVar {
				add, kept := mergeJava(env, e)
				if kept {
					javaKept = append(javaKept, t.name)
				}
				if add == nil {
					continue
				}
				e = *add
			}
			env.Content = append(env.Content, toNode(e, "name"))
		}
		if !t.trust {
			noTrust = append(noTrust, t.name)
			continue
		}
		plain = append(plain, t.name)
		mounts := child(t.c, "volumeMounts", yaml.SequenceNode, "")
		mounts.Content = append(mounts.Content, trustMount())
	}
	msg := "injected"
	if in.o.Capture {
		c := in.o.CaptureOptions
		msg += fmt.Sprintf("; %s redirects TCP to ports %s to hookpace's port %d (hookpace runs as uid %d)", CaptureContainerName, c.portList(), c.Port, c.UID)
	}
	if len(plain) > 0 {
		if in.proxyEnv() {
			msg += "; proxy and trust variables on " + strings.Join(plain, ", ")
		} else {
			msg += "; trust variables on " + strings.Join(plain, ", ")
		}
	}
	if len(noTrust) > 0 && in.proxyEnv() {
		msg += "; proxy variables only on " + strings.Join(noTrust, ", ")
	}
	if len(javaKept) > 0 {
		msg += "; JAVA_TOOL_OPTIONS kept, hookpace's options appended, on " + strings.Join(javaKept, ", ")
	}
	if in.o.SpoolPVC != "" || in.o.SpoolClaim != "" {
		// The PVC must be writable by hookpace's user: fsGroup adds a group
		// the volume belongs to, to every container of the pod.
		sc := child(w.spec, "securityContext", yaml.MappingNode, "initContainers")
		if get(sc, "fsGroup") == nil {
			set(sc, "fsGroup", intScalar(nonRootID), "")
			msg += "; securityContext.fsGroup " + strconv.Itoa(nonRootID) + " (the spool claim must be writable by hookpace)"
		}
		if w.kind == "Deployment" && str(dig(w.obj, "spec", "strategy"), "type") != "Recreate" {
			msg += "; warning: with --spool-pvc use strategy Recreate, or the new pod waits for the old one's claim"
		}
	}
	meta := child(w.holder, "metadata", yaml.MappingNode, "spec")
	set(child(meta, "annotations", yaml.MappingNode, ""), Annotation, scalar(Format), "")
	rec.annotate(w)
	return msg, nil
}

// targets are the containers that get the variables: every app container,
// and the init containers with Options.InitContainers.
func (in *Injector) targets(spec *yaml.Node) []target {
	cs := items(get(spec, "containers"))
	if in.o.InitContainers {
		cs = append(cs, items(get(spec, "initContainers"))...)
	}
	var ts []target
	for _, c := range cs {
		name := str(c, "name")
		if in.noTrust[name] {
			in.seen[name] = true
		}
		ts = append(ts, target{c: c, name: name, trust: !in.noTrust["*"] && !in.noTrust[name]})
	}
	return ts
}

// check refuses what inject would clash with, naming each clash; else it
// returns the terminationGracePeriodSeconds to set (0: keep the pod's).
func (in *Injector) check(w workload, targets []target) (int64, error) {
	var errs []error
	refuse := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(w.name+": "+format, args...))
	}
	if len(items(get(w.spec, "containers"))) == 0 {
		refuse("no containers")
	}
	if str(w.spec, "hostNetwork") == "true" {
		refuse("hostNetwork: true: the pod shares the node's 127.0.0.1, where hookpace's port %d would clash with every other injected pod on the node", in.o.ProxyPort)
	}
	merged := []*yaml.Node{w.spec, dig(w.holder, "metadata"), dig(w.holder, "metadata", "annotations")}
	for _, t := range targets {
		merged = append(merged, t.c)
	}
	for _, m := range merged {
		if hasMerge(m) {
			refuse("a YAML merge key (<<) at line %d: inject edits these keys one by one; expand it first", m.Line)
		}
	}
	unmarked := "inject did not put it there (no " + Annotation + " annotation)"
	for _, key := range []string{"initContainers", "containers", "ephemeralContainers"} {
		for _, c := range items(get(w.spec, key)) {
			name := str(c, "name")
			if name == ContainerName {
				refuse("%s has a container named %q already; %s", key, name, unmarked)
			}
			for _, p := range items(get(c, "ports")) {
				switch port, pname := str(p, "containerPort"), str(p, "name"); {
				case port == strconv.Itoa(in.o.ProxyPort) || port == strconv.Itoa(in.o.AdminPort):
					refuse("container %q declares port %s, which hookpace listens on: move hookpace's listen or admin in the ConfigMap and pass --proxy-port/--admin-port", name, port)
				case pname == ProxyPortName || pname == AdminPortName:
					refuse("container %q has a port named %q already; %s", name, pname, unmarked)
				}
			}
		}
	}
	for _, v := range items(get(w.spec, "volumes")) {
		if n := str(v, "name"); slices.Contains(ourVolumes, n) {
			refuse("a volume is named %q already; %s", n, unmarked)
		}
	}
	for _, v := range items(dig(w.obj, "spec", "volumeClaimTemplates")) {
		if w.kind == "StatefulSet" && str(get(v, "metadata"), "name") == SpoolVolume {
			refuse("a volumeClaimTemplate is named %q already; %s", SpoolVolume, unmarked)
		}
	}
	if in.o.SpoolClaim != "" && w.kind != "StatefulSet" {
		refuse("--spool-volume-claim: only a StatefulSet gives each pod a claim of its own (volumeClaimTemplates); for a %s use an emptyDir with a hand-off, or --spool-pvc for a single pod", w.kind)
	}
	for _, t := range targets {
		ours := in.appEnv(t.trust)
		for _, e := range items(get(t.c, "env")) {
			n := str(e, "name")
			if n == javaVar {
				continue // hookpace's options are appended to the app's
			}
			if slices.ContainsFunc(ours, func(o corev1.EnvVar) bool { return o.Name == n }) {
				hint := ""
				switch {
				case strings.EqualFold(n, "NO_PROXY"):
					hint = " (add hosts with --no-proxy)"
				case n == phpVar:
					hint = " (drop yours, or add " + path.Join(TrustDir, "php") + " to it and set the trust variables yourself with --no-trust=" + t.name + ")"
				case slices.Contains(trustVars, n):
					hint = " (--no-trust=" + t.name + " leaves the trust variables alone)"
				}
				refuse("container %q sets %s already; inject sets it%s", t.name, n, hint)
			}
		}
	}
	if in.o.SpoolPVC != "" {
		if n, ok := w.replicas(); !ok || n > 1 {
			refuse("--spool-pvc %s: %s would share one claim, and a spool opens in one process only: use an emptyDir (with a hand-off in the ConfigMap) for more than one pod",
				in.o.SpoolPVC, w.many(n, ok))
		}
	}
	errs = append(errs, in.captureRefusals(w)...)
	errs = append(errs, in.inboundRefusals(w)...)
	// The app stops first, then hookpace: its shutdown.timeout (in-flight
	// deliveries, drain, hand-off) and 10 s to close the spool.
	want := int64((in.o.AppStop + in.o.ShutdownTimeout + 10*time.Second + time.Second - 1) / time.Second)
	if cur := get(w.spec, "terminationGracePeriodSeconds"); cur != nil && !isNull(cur) {
		n, err := strconv.ParseInt(cur.Value, 10, 64)
		switch {
		case err != nil:
			refuse("terminationGracePeriodSeconds %q is not a number", cur.Value)
		case n >= want:
			want = 0 // the user's is long enough: never shortened
		}
	}
	return want, errors.Join(errs...)
}

// replicas is how many pods w runs at once, if known.
func (w workload) replicas() (int, bool) {
	field := func(m *yaml.Node, key string) (int, bool) {
		v := get(m, key)
		if v == nil || isNull(v) {
			return 1, true
		}
		n, err := strconv.Atoi(v.Value)
		return n, err == nil
	}
	switch w.kind {
	case "Deployment", "StatefulSet":
		return field(get(w.obj, "spec"), "replicas")
	case "Job":
		return field(get(w.obj, "spec"), "parallelism")
	case "CronJob":
		return field(dig(w.obj, "spec", "jobTemplate", "spec"), "parallelism")
	case "Pod":
		return 1, true
	}
	return 0, false // a DaemonSet: one per node
}

func (w workload) many(n int, known bool) string {
	if !known {
		return "its pods"
	}
	return strconv.Itoa(n) + " pods"
}

// items are the mappings of a sequence node.
func items(seq *yaml.Node) []*yaml.Node {
	if seq == nil || seq.Kind != yaml.SequenceNode {
		return nil
	}
	var out []*yaml.Node
	for _, n := range seq.Content {
		if n.Kind == yaml.MappingNode {
			out = append(out, n)
		}
	}
	return out
}

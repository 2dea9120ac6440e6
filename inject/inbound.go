package inject

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
)

// Inbound mode: hookpace's inbound listener stands in front of an app
// container's port. The sidecar gets a named port for each, the
// ConfigMap's config.yaml an inbound route from that port to the app over
// the pod's loopback (and the app's hosts entry), and a Service that sent
// providers to the app's port sends them to the named port instead.

// InboundPort is one --inbound: an app container port that hookpace's
// inbound listener stands in front of.
type InboundPort struct {
	Port   int // the app's container port: the route's to is http://127.0.0.1:Port
	Listen int // the sidecar's port for the route; 0 = Port + InboundOffset
}

// InboundOffset is added to an app's port to give hookpace's port in
// front of it, unless --inbound PORT:LISTEN names one.
const InboundOffset = 10000

// InboundPortPrefix starts the sidecar's port names: "hp-in-" and the
// app's port, at most 11 characters, within a port name's 15, and a valid
// IANA service name (letters, digits, single hyphens).
const InboundPortPrefix = "hp-in-"

// InboundSecretVolume holds the Secret --inbound-secret names, mounted
// into the sidecar at InboundSecretDir, for the routes' verify.secret_file.
const (
	InboundSecretVolume = "hookpace-inbound-secret"
	InboundSecretDir    = "/etc/hookpace-inbound"
)

// ParseInboundPort reads --inbound's value: PORT or PORT:LISTEN.
func ParseInboundPort(s string) (InboundPort, error) {
	port, listen, two := strings.Cut(strings.TrimSpace(s), ":")
	var p InboundPort
	var err error
	if p.Port, err = strconv.Atoi(port); err != nil {
		return p, fmt.Errorf("%q: want the app's container PORT, or PORT:LISTEN", s)
	}
	if two {
		if p.Listen, err = strconv.Atoi(listen); err != nil {
			return p, fmt.Errorf("%q: want the app's container PORT, or PORT:LISTEN", s)
		}
	}
	return p, nil
}

// ListenPort is the sidecar's port in front of the app's.
func (p InboundPort) ListenPort() int {
	if p.Listen != 0 {
		return p.Listen
	}
	return p.Port + InboundOffset
}

// PortName names the sidecar's port (and the config's route): hp-in-PORT.
func (p InboundPort) PortName() string { return InboundPortPrefix + strconv.Itoa(p.Port) }

// appHost is the app's hosts entry: its address on the pod's loopback.
func (p InboundPort) appHost() string { return "127.0.0.1:" + strconv.Itoa(p.Port) }

// checkInbound validates the inbound ports.
func (o *Options) checkInbound() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("--inbound: "+format, args...)) }
	taken := map[int]string{o.ProxyPort: "--proxy-port", o.AdminPort: "--admin-port"}
	if o.Capture {
		taken[o.CaptureOptions.Port] = "--capture-port"
	}
	apps := map[int]bool{}
	for _, p := range o.Inbound {
		if p.Port < 1 || p.Port > 65535 {
			bad("%d is not a port", p.Port)
			continue
		}
		if apps[p.Port] {
			bad("%d given twice", p.Port)
		}
		if taken[p.Port] != "" {
			bad("%d is hookpace's own %s in the pod: the app cannot listen there too", p.Port, taken[p.Port])
		}
		apps[p.Port] = true
	}
	for _, p := range o.Inbound {
		l := p.ListenPort()
		switch {
		case p.Port < 1 || p.Port > 65535:
		case l > 65535 || l < 1024:
			bad("%d: hookpace's port in front of it would be %d; give one from 1024 to 65535 (hookpace runs as non-root): --inbound %d:LISTEN", p.Port, l, p.Port)
		case apps[l]:
			bad("%d: hookpace's port %d is an app port given to --inbound too; give another: --inbound %d:LISTEN", p.Port, l, p.Port)
		case taken[l] != "":
			bad("%d: hookpace's port %d is its %s; give another: --inbound %d:LISTEN", p.Port, l, taken[l], p.Port)
		default:
			taken[l] = fmt.Sprintf("port in front of %d", p.Port)
		}
	}
	if o.InboundSecret != "" && len(o.Inbound) == 0 {
		errs = append(errs, fmt.Errorf("--inbound-secret: without --inbound"))
	}
	return errs
}

// inboundPorts are the sidecar's named ports for the inbound routes.
func (in *Injector) inboundPorts() []corev1.ContainerPort {
	var ps []corev1.ContainerPort
	for _, p := range in.o.Inbound {
		ps = append(ps, corev1.ContainerPort{Name: p.PortName(), ContainerPort: int32(p.ListenPort()), Protocol: corev1.ProtocolTCP})
	}
	return ps
}

// inboundRefusals names what the inbound ports would clash with in w: an
// app container that declares one of hookpace's ports, or a port name
// inject uses that inject did not put there.
func (in *Injector) inboundRefusals(w workload) []error {
	var errs []error
	for _, key := range []string{"initContainers", "containers", "ephemeralContainers"} {
		for _, c := range items(get(w.spec, key)) {
			for _, cp := range items(get(c, "ports")) {
				port, name := str(cp, "containerPort"), str(cp, "name")
				for _, p := range in.o.Inbound {
					switch {
					case port == strconv.Itoa(p.ListenPort()):
						errs = append(errs, fmt.Errorf("%s: container %q declares port %s, which hookpace would listen on in front of %d: pass --inbound %d:LISTEN with a free port",
							w.name, str(c, "name"), port, p.Port, p.Port))
					case name == p.PortName():
						errs = append(errs, fmt.Errorf("%s: container %q has a port named %q already; inject did not put it there (no %s annotation)", w.name, str(c, "name"), name, Annotation))
					}
				}
			}
		}
	}
	return errs
}

// undeclared warns of the inbound ports no container of w declares: a
// typo, or an app that does not list its ports (then all is well if it
// listens there).
func (in *Injector) undeclared(w workload) string {
	declared := map[string]bool{}
	for _, c := range items(get(w.spec, "containers")) {
		for _, cp := range items(get(c, "ports")) {
			declared[str(cp, "containerPort")] = true
		}
	}
	var missing []string
	for _, p := range in.o.Inbound {
		if !declared[strconv.Itoa(p.Port)] {
			missing = append(missing, strconv.Itoa(p.Port))
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return "; warning: --inbound " + strings.Join(missing, ",") + ": no container declares that port; hookpace's door forwards to it all the same (check that the app listens there)"
}

// inboundBook is what inject learns of the inbound ports while it reads
// the manifests.
type inboundBook struct {
	pods      []podPorts   // the pods injected, for the Services that select them
	services  []*yaml.Node // every Service, edited once all pods are known
	names     []string     // their names for messages, in the same order
	configMap bool         // the ConfigMap named Options.ConfigMap was among the inputs
	added     []string     // routes inject added to it
}

// podPorts are an injected pod's namespace, labels, and the names its
// containers give each inbound port.
type podPorts struct {
	namespace string
	labels    map[string]string
	names     map[string]int // port name → container port
}

// notePod records w's labels and port names for the Services.
func (in *Injector) notePod(w workload) {
	if len(in.o.Inbound) == 0 {
		return
	}
	pp := podPorts{namespace: str(dig(w.obj, "metadata"), "namespace"), labels: map[string]string{}, names: map[string]int{}}
	labels := dig(w.holder, "metadata", "labels")
	if labels != nil && labels.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(labels.Content); i += 2 {
			pp.labels[labels.Content[i].Value] = labels.Content[i+1].Value
		}
	}
	for _, c := range items(get(w.spec, "containers")) {
		for _, cp := range items(get(c, "ports")) {
			if n, err := strconv.Atoi(str(cp, "containerPort")); err == nil && str(cp, "name") != "" {
				pp.names[str(cp, "name")] = n
			}
		}
	}
	in.inbound.pods = append(in.inbound.pods, pp)
}

// inboundConfigMap adds a route and a hosts entry for each inbound port
// to hookpace's ConfigMap when it is among the manifests, leaving a route
// that is there already as it is (with the verify, paths and answer the
// user gave it); a route on the port to elsewhere is refused.
func (in *Injector) inboundConfigMap(obj *yaml.Node, name string) error {
	if len(in.o.Inbound) == 0 || str(obj, "kind") != "ConfigMap" || str(dig(obj, "metadata"), "name") != in.o.ConfigMap {
		return nil
	}
	in.inbound.configMap = true
	cfgNode := get(get(obj, "data"), "config.yaml")
	if cfgNode == nil {
		return fmt.Errorf("%s: no config.yaml to add the inbound routes to", name)
	}
	cfg, err := readConfig(cfgNode, name)
	if err != nil {
		return err
	}
	root := cfg.root()
	changed := false
	for _, p := range in.o.Inbound {
		found, err := findRoute(root, p)
		if err != nil {
			return fmt.Errorf("%s: config.yaml: %w", name, err)
		}
		if !found {
			routes := child(root, "inbound", yaml.SequenceNode, "")
			routes.Content = append(routes.Content, inboundRoute(p))
			in.inbound.added = append(in.inbound.added, p.PortName())
			changed = true
		}
		hosts := child(root, "hosts", yaml.MappingNode, "")
		if get(hosts, p.appHost()) == nil {
			set(hosts, p.appHost(), appHostEntry(), "")
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return cfg.write(name)
}

// findRoute reports whether root's inbound list has p's route: one that
// listens on p's port and goes to the app's port on loopback. A route with
// one of the two and not the other is an error.
func findRoute(root *yaml.Node, p InboundPort) (bool, error) {
	for i, r := range items(get(root, "inbound")) {
		listen, to := str(r, "listen"), strings.TrimSuffix(str(r, "to"), "/")
		_, lport, _ := net.SplitHostPort(listen)
		onPort := lport == strconv.Itoa(p.ListenPort())
		toApp := to == "http://"+p.appHost() || to == "http://localhost:"+strconv.Itoa(p.Port)
		switch {
		case onPort && toApp:
			return true, nil
		case onPort || toApp:
			name := str(r, "name")
			if name == "" {
				name = fmt.Sprintf("inbound[%d]", i)
			}
			return false, fmt.Errorf("inbound route %s (listen %s, to %s) is not --inbound %d's (listen :%d, to http://%s): change it, or pass --inbound %d:LISTEN with its port",
				name, listen, to, p.Port, p.ListenPort(), p.appHost(), p.Port)
		}
	}
	return false, nil
}

// inboundRoute is p's route as inject adds it: every POST is a webhook,
// nothing verified; the user adds verify (and paths, answer, dedupe) in
// the ConfigMap, where a re-inject leaves them.
func inboundRoute(p InboundPort) *yaml.Node {
	r := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	set(r, "name", scalar(p.PortName()), "")
	set(r, "listen", scalar(":"+strconv.Itoa(p.ListenPort())), "")
	set(r, "to", scalar("http://"+p.appHost()), "")
	return r
}

// appHostEntry paces the app: concurrency from its latency and its
// 429/503s; the rate is only a ceiling.
func appHostEntry() *yaml.Node {
	e := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: yaml.FlowStyle}
	set(e, "rate", scalar("1000/s"), "")
	set(e, "burst", intScalar(100), "")
	set(e, "concurrency", scalar("auto"), "")
	return e
}

// inboundNotes says once, after the manifests, what the inbound ports
// still need: the ConfigMap's routes, and Services.
func (in *Injector) inboundNotes(log io.Writer, reached map[int]bool) {
	if len(in.o.Inbound) == 0 || len(in.inbound.pods) == 0 {
		return
	}
	if len(in.inbound.added) > 0 {
		fmt.Fprintf(log, "note: --inbound: added the inbound routes %s to the ConfigMap %q, unverified: add verify: {scheme: ..., secret_file: %s/KEY} to each (with --inbound-secret NAME)\n",
			strings.Join(in.inbound.added, ", "), in.o.ConfigMap, InboundSecretDir)
	}
	if !in.inbound.configMap {
		var want []string
		for _, p := range in.o.Inbound {
			want = append(want, fmt.Sprintf("{name: %s, listen: \":%d\", to: \"http://%s\"}", p.PortName(), p.ListenPort(), p.appHost()))
		}
		fmt.Fprintf(log, "note: --inbound: the ConfigMap %q must have the inbound routes %s (the chart: sidecar.inbound), or hookpace's ports in front of the app refuse connections\n",
			in.o.ConfigMap, strings.Join(want, ", "))
	}
	for _, p := range in.o.Inbound {
		if !reached[p.Port] {
			target := p.PortName()
			if in.o.InboundTargetNumber {
				target = strconv.Itoa(p.ListenPort())
			}
			fmt.Fprintf(log, "note: --inbound %d: no Service among the manifests sends the injected pods' port %d to hookpace: in the Service that providers reach, set targetPort: %s "+
				"on the port whose targetPort is %d (or that port's name); until then they reach the app directly\n", p.Port, p.Port, target, p.Port)
		}
	}
}

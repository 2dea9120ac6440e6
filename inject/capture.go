package inject

import (
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Capture mode: an init container applies `hookpace capture rules` in the
// pod's network namespace before any other container starts, so that the
// app's outbound TCP to CaptureOptions.Ports reaches hookpace's capture
// listener whatever its HTTP client does with proxy variables. hookpace
// runs under its own uid, which the rules exclude: its deliveries are
// never captured again.

// CaptureContainerName is the init container that applies the rules.
const CaptureContainerName = "hookpace-capture"

// DefaultCaptureImage holds hookpace and iptables (the Dockerfile's
// capture-init target): the main image is distroless and has no iptables.
const DefaultCaptureImage = "ghcr.io/hookpace/hookpace-capture-init:0.1.0"

// DefaultCaptureUID is hookpace's uid with capture: not the image's
// nonroot 65532, which many app images (distroless nonroot) run as too,
// and whose traffic the rules would then leave uncaptured.
const DefaultCaptureUID = 15532

// CaptureOptions say how inject --capture sets up the redirect.
type CaptureOptions struct {
	Capture bool
	Port    int    // capture.listen's port in the ConfigMap's config.yaml
	Ports   []int  // the destination TCP ports redirected
	Image   string // the init container's image: hookpace and iptables
	UID     int64  // hookpace's uid, excluded from the redirect
	// ProxyEnv keeps the proxy variables (and Java's proxy properties)
	// beside capture, for runtimes that honour them; off, an app
	// container gets only the trust variables.
	ProxyEnv bool
}

// DefaultCaptureOptions are capture's defaults (capture itself off).
func DefaultCaptureOptions() CaptureOptions {
	return CaptureOptions{Port: 15001, Ports: []int{80, 443}, Image: DefaultCaptureImage, UID: DefaultCaptureUID}
}

// captureBook is what inject learns of capture while reading manifests.
type captureBook struct {
	configMap bool // the ConfigMap named Options.ConfigMap was among the inputs
	set       bool // inject set capture.listen in it
	pods      int  // pod templates given the init container
	// uncovered are ports that the ConfigMap's hosts keys name and
	// CaptureOptions.Ports leaves alone ("8443").
	uncovered []string
}

// checkCapture validates the capture options.
func (o *Options) checkCapture() []error {
	c := o.CaptureOptions
	if !c.Capture {
		return nil
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Port < 1 || c.Port > 65535 || c.Port == o.ProxyPort || c.Port == o.AdminPort {
		bad("--capture-port: %d is not a port, or is the proxy's or admin's", c.Port)
	}
	if len(c.Ports) == 0 || len(c.Ports) > 15 {
		bad("--capture-ports: want 1 to 15 ports, got %d", len(c.Ports))
	}
	for _, p := range c.Ports {
		if p < 1 || p > 65535 || p == c.Port {
			bad("--capture-ports: %d is not a port, or is --capture-port (the listener would capture itself)", p)
		}
	}
	if c.Image == "" {
		bad("--capture-image: empty")
	}
	if c.UID <= 0 {
		bad("--capture-uid: %d: hookpace's own non-root uid, excluded from the redirect", c.UID)
	}
	if len(o.CIDRs) == 0 {
		bad("--capture: give the cluster's --service-cidr (and --cluster-cidr): without them the app's calls to other Services on ports %s would be redirected to hookpace too "+
			"(the service range is the kube-apiserver's --service-cluster-ip-range; kubectl get svc kubernetes -n default shows an address in it)", c.portList())
	}
	return errs
}

func (c CaptureOptions) portList() string {
	s := make([]string, len(c.Ports))
	for i, p := range c.Ports {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

// hookpaceUID is the uid hookpace's sidecar runs as.
func (in *Injector) hookpaceUID() int64 {
	if in.o.Capture {
		return in.o.CaptureOptions.UID
	}
	return nonRootID
}

// proxyEnv says whether app containers get the proxy variables.
func (in *Injector) proxyEnv() bool { return !in.o.Capture || in.o.ProxyEnv }

// excludeCIDRs are the destinations the rules leave alone: the cluster's
// ranges, the addresses and ranges among NO_PROXY's entries (loopback is
// left alone by the rules themselves). Names in NO_PROXY cannot be: the
// kernel sees addresses.
func (in *Injector) excludeCIDRs() (cidrs, names []string) {
	seen := map[string]bool{}
	for _, h := range in.o.noProxy() {
		var p netip.Prefix
		if a, err := netip.ParseAddr(h); err == nil {
			p = netip.PrefixFrom(a, a.BitLen())
		} else if q, err := netip.ParsePrefix(h); err == nil {
			p = q.Masked()
		} else {
			if !slices.Contains(DefaultNoProxy, h) {
				names = append(names, h)
			}
			continue
		}
		if p.Addr().IsLoopback() || seen[p.String()] {
			continue
		}
		seen[p.String()] = true
		cidrs = append(cidrs, p.String())
	}
	return cidrs, names
}

// captureInit is the init container that applies the rules: root with
// NET_ADMIN and NET_RAW for the moment it runs, nothing else.
func (in *Injector) captureInit() *yaml.Node {
	c := in.o.CaptureOptions
	args := []string{"capture", "rules", "--apply", "--to", strconv.Itoa(c.Port),
		"--exclude-uid", strconv.FormatInt(c.UID, 10), "--ports", c.portList(), "--reject-quic"}
	cidrs, _ := in.excludeCIDRs()
	for _, p := range cidrs {
		args = append(args, "--exclude-cidr", p)
	}
	ctr := corev1.Container{
		Name:    CaptureContainerName,
		Image:   c.Image,
		Command: []string{binary},
		Args:    args,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
		SecurityContext: &corev1.SecurityContext{
			RunAsUser:                ptr(int64(0)),
			RunAsGroup:               ptr(int64(0)),
			RunAsNonRoot:             ptr(false),
			AllowPrivilegeEscalation: ptr(false),
			Privileged:               ptr(false),
			Capabilities:             &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}, Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
	return toNode(ctr, "name", "image", "command", "args", "resources", "securityContext")
}

// captureRefusals names what capture would clash with in w: a container
// already named like the init container, and an app container that runs
// as hookpace's uid (the rules would leave its traffic uncaptured).
func (in *Injector) captureRefusals(w workload) []error {
	if !in.o.Capture {
		return nil
	}
	var errs []error
	for _, key := range []string{"initContainers", "containers", "ephemeralContainers"} {
		for _, c := range items(get(w.spec, key)) {
			if str(c, "name") == CaptureContainerName {
				errs = append(errs, fmt.Errorf("%s: %s has a container named %q already; inject did not put it there (no %s annotation)", w.name, key, CaptureContainerName, Annotation))
			}
		}
	}
	uid := strconv.FormatInt(in.o.CaptureOptions.UID, 10)
	podUID := str(dig(w.spec, "securityContext"), "runAsUser")
	for _, key := range []string{"initContainers", "containers"} {
		for _, c := range items(get(w.spec, key)) {
			u := str(dig(c, "securityContext"), "runAsUser")
			if u == "" {
				u = podUID
			}
			if u == uid {
				errs = append(errs, fmt.Errorf("%s: container %q runs as uid %s, hookpace's with --capture: its traffic would not be captured; pass another --capture-uid", w.name, str(c, "name"), uid))
			}
		}
	}
	return errs
}

// captureConfigMap sets capture.listen in hookpace's ConfigMap when it is
// among the manifests and has none, and refuses one on another port.
func (in *Injector) captureConfigMap(obj *yaml.Node, name string) error {
	if !in.o.Capture || str(obj, "kind") != "ConfigMap" || str(dig(obj, "metadata"), "name") != in.o.ConfigMap {
		return nil
	}
	in.capture.configMap = true
	cfgNode := get(get(obj, "data"), "config.yaml")
	if cfgNode == nil {
		return fmt.Errorf("%s: no config.yaml to set capture.listen in", name)
	}
	cfg, err := readConfig(cfgNode, name)
	if err != nil {
		return err
	}
	root := cfg.root()
	in.capture.uncovered = uncoveredPorts(get(root, "hosts"), in.o.CaptureOptions.Ports)
	if cur := str(get(root, "capture"), "listen"); cur != "" {
		if !strings.HasSuffix(cur, ":"+strconv.Itoa(in.o.CaptureOptions.Port)) {
			return fmt.Errorf("%s: config.yaml's capture.listen is %q: pass its port as --capture-port", name, cur)
		}
		return nil
	}
	set(child(root, "capture", yaml.MappingNode, ""), "listen", scalar(in.captureListen()), "")
	if err := cfg.write(name); err != nil {
		return err
	}
	in.capture.set = true
	return nil
}

// captureListen is the capture.listen inject asks of the config: every
// address of the pod (IPv4 redirects arrive at 127.0.0.1, IPv6 ones at
// ::1); connections that were not redirected are refused.
func (in *Injector) captureListen() string {
	return ":" + strconv.Itoa(in.o.CaptureOptions.Port)
}

// captureNotes says once, after the manifests, what capture needs of the
// cluster and of the config.
func (in *Injector) captureNotes(log io.Writer) {
	c := in.o.CaptureOptions
	if !c.Capture || in.capture.pods == 0 {
		return
	}
	fmt.Fprintf(log, "note: --capture: the init container %s runs as root with the capabilities NET_ADMIN and NET_RAW, only while it applies the rules (as istio-init does); "+
		"the Pod Security levels baseline and restricted refuse them: run these pods in a namespace labelled pod-security.kubernetes.io/enforce=privileged, or inject without --capture (the proxy variables need no capability)\n",
		CaptureContainerName)
	switch {
	case in.capture.set:
		fmt.Fprintf(log, "note: --capture: set capture.listen: %q in the ConfigMap %q\n", in.captureListen(), in.o.ConfigMap)
	case !in.capture.configMap:
		fmt.Fprintf(log, "note: --capture: the ConfigMap %q must set capture.listen: %q (the chart: sidecar.capture: true), or the redirected connections are refused\n",
			in.o.ConfigMap, in.captureListen())
	}
	if len(in.capture.uncovered) > 0 {
		fmt.Fprintf(log, "warning: --capture: the ConfigMap %q names partners on port(s) %s, which --capture-ports %s leaves alone: their webhooks go out unpaced; pass --capture-ports %s,%s\n",
			in.o.ConfigMap, strings.Join(in.capture.uncovered, ","), c.portList(), c.portList(), strings.Join(in.capture.uncovered, ","))
	}
	if _, names := in.excludeCIDRs(); len(names) > 0 {
		fmt.Fprintf(log, "warning: --capture: %s (--no-proxy) are captured on ports %s all the same (the rules see addresses, not names): pass their ranges with --no-proxy CIDR\n",
			strings.Join(names, ", "), c.portList())
	}
}

// uncoveredPorts are the ports that the keys of hosts (a config's hosts
// mapping) name and ports does not hold, in order, without repeats.
func uncoveredPorts(hosts *yaml.Node, ports []int) []string {
	var out []string
	if hosts == nil || hosts.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(hosts.Content); i += 2 {
		k := hosts.Content[i].Value
		j := strings.LastIndexByte(k, ':')
		if j < 0 || strings.HasSuffix(k, "]") {
			continue
		}
		p, err := strconv.Atoi(k[j+1:])
		if err != nil || p <= 0 || p > 65535 || slices.Contains(ports, p) || slices.Contains(out, k[j+1:]) {
			continue
		}
		out = append(out, k[j+1:])
	}
	return out
}

package inject

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// DefaultImage is the image the chart's values.yaml names (a test keeps
// them equal).
const DefaultImage = "ghcr.io/hookpace/hookpace:0.1.0"

// What inject puts into a pod, by name. A manifest that already has one of
// these names and no Annotation is refused: inject did not put it there.
const (
	// Annotation marks a pod template inject wrote; its value is the
	// format of what was injected. A marked object is left as it is.
	Annotation = "hookpace.dev/injected"
	Format     = "v1"

	ContainerName = "hookpace"
	SpoolVolume   = "hookpace-spool"
	ConfigVolume  = "hookpace-config"
	HandoffVolume = "hookpace-handoff"
	TokenVolume   = "hookpace-admin-token"
	ProxyPortName = "hookpace-proxy"
	AdminPortName = "hookpace-admin"

	// TrustDir is where app containers see <spool.dir>/trust/, the public
	// half of hookpace's HTTPS interception CA: ca.crt, bundle.pem (the
	// system roots and the CA) and truststore.p12 (the same, PKCS#12,
	// password changeit). The key stays in <spool.dir>/mitm/, unmounted.
	TrustDir = "/var/run/hookpace/trust"

	configDir  = "/etc/hookpace"
	handoffDir = "/etc/hookpace-handoff" // the chart's handoff_auth_file is handoffDir/handoff-credentials
	tokenDir   = "/etc/hookpace-admin"   // the chart's admin.token_file is tokenDir/token
	binary     = "/usr/local/bin/hookpace"
	nonRootID  = 65532 // the image's nonroot user
)

// DefaultNoProxy is what an app container reaches directly, never through
// hookpace: its own pod, in-cluster Services by their cluster names, and
// the cloud metadata endpoints.
var DefaultNoProxy = []string{"localhost", "127.0.0.1", "::1", ".svc", ".svc.cluster.local", ".cluster.local",
	"169.254.169.254", "metadata.google.internal"}

// Options say what inject adds. Defaults returns them filled; the ports,
// spool dir and shutdown timeout must agree with the config.yaml in the
// ConfigMap (the chart's sidecar-mode defaults do).
type Options struct {
	Image     string
	ConfigMap string // holds config.yaml, mounted as a directory so that updates reach the file watch

	ProxyPort int // config's listen port (on 127.0.0.1 or a wildcard host)
	AdminPort int // config's admin port, for the probes

	SpoolDir  string // config's spool.dir: the spool volume is mounted there
	SpoolPVC  string // an existing PersistentVolumeClaim for the spool; "" = emptyDir
	SpoolSize string // the emptyDir's sizeLimit; "" = none
	// SpoolClaim is the size of a claim per pod from a volumeClaimTemplate
	// (StatefulSets only); "" = none.
	SpoolClaim string

	ShutdownTimeout time.Duration // config's shutdown.timeout
	AppStop         time.Duration // how long the app takes to stop; hookpace stops after it

	// AcceptLoss injects Jobs and CronJobs without a hand-off target: what
	// is still queued when their containers finish is lost.
	AcceptLoss bool
	// HandoffConfigured says the ConfigMap's config.yaml sets
	// shutdown.handoff when the ConfigMap is not among the manifests (the
	// injector's chart knows it).
	HandoffConfigured bool

	HandoffSecret       string // Secret with keys handoff-credentials and handoff-secret (shutdown.handoff_auth_file, handoff_secret_file)
	AdminTokenSecret    string // Secret with key token, for admin.token_file (the chart's ServiceMonitor)
	RedisPasswordSecret string // NAME or NAME:KEY (default key redis-password) for HOOKPACE_REDIS_PASSWORD
	// FleetRedis is set as fleet.redis in the ConfigMap's config.yaml
	// (which must be among the manifests); "": left as it is.
	FleetRedis string

	CPURequest, MemoryRequest, CPULimit, MemoryLimit string // "" = none
	ReadinessProbe                                   bool

	NoProxy        []string // added to DefaultNoProxy
	CIDRs          []string // the cluster's pod and service ranges, added to NO_PROXY
	NoTrust        []string // containers that get no trust variables; "*" = all
	Java           bool     // JAVA_TOOL_OPTIONS with the proxy and the trust store
	InitContainers bool     // the app's init containers get the variables too

	CaptureOptions // --capture: the kernel redirects the app's outbound TCP to hookpace

	// Inbound are the app ports hookpace's inbound listener stands in
	// front of (--inbound): a named port on the sidecar each, a route in
	// the ConfigMap, and the Services that reach them moved to it.
	Inbound []InboundPort
	// InboundSecret is a Secret mounted at InboundSecretDir in the
	// sidecar, for the routes' verify.secret_file; "" = none.
	InboundSecret string
	// InboundTargetNumber moves Services' targetPort to the number of
	// hookpace's port rather than its name: Kubernetes before 1.32 does
	// not resolve a named port of a native sidecar for a Service.
	InboundTargetNumber bool
}

// Defaults are the chart's sidecar-mode settings.
func Defaults() Options {
	return Options{
		Image:           DefaultImage,
		ConfigMap:       "hookpace",
		ProxyPort:       8080,
		AdminPort:       9090,
		SpoolDir:        "/var/lib/hookpace",
		SpoolSize:       "2Gi",
		ShutdownTimeout: 30 * time.Second,
		AppStop:         10 * time.Second,
		CPURequest:      "50m",
		MemoryRequest:   "48Mi",
		MemoryLimit:     "192Mi",
		CaptureOptions:  DefaultCaptureOptions(),
	}
}

// check validates o and returns its quantities parsed.
func (o *Options) check() (resources, error) {
	var errs []error
	bad := func(flag, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--"+flag+": "+format, args...))
	}
	if o.Image == "" {
		bad("image", "empty")
	}
	if o.ConfigMap == "" {
		bad("configmap", "empty")
	}
	for flag, p := range map[string]int{"proxy-port": o.ProxyPort, "admin-port": o.AdminPort} {
		if p < 1 || p > 65535 {
			bad(flag, "%d is not a port", p)
		}
	}
	if o.ProxyPort == o.AdminPort {
		bad("admin-port", "the same as --proxy-port (%d)", o.ProxyPort)
	}
	if !strings.HasPrefix(o.SpoolDir, "/") {
		bad("spool-dir", "want an absolute path, got %q", o.SpoolDir)
	}
	if o.ShutdownTimeout <= 0 || o.AppStop < 0 {
		bad("shutdown-timeout", "must be positive (and --app-stop not negative)")
	}
	var r resources
	for _, q := range []struct {
		flag, val string
		dst       **resource.Quantity
	}{
		{"cpu-request", o.CPURequest, &r.cpuReq}, {"memory-request", o.MemoryRequest, &r.memReq},
		{"cpu-limit", o.CPULimit, &r.cpuLim}, {"memory-limit", o.MemoryLimit, &r.memLim}, {"spool-size", o.SpoolSize, &r.spool},
		{"spool-volume-claim", o.SpoolClaim, &r.claim},
	} {
		if q.val == "" {
			continue
		}
		v, err := resource.ParseQuantity(q.val)
		if err != nil || v.Sign() <= 0 {
			bad(q.flag, "want a positive Kubernetes quantity (50m, 48Mi), got %q", q.val)
			continue
		}
		*q.dst = &v
	}
	if o.SpoolClaim != "" && o.SpoolPVC != "" {
		bad("spool-volume-claim", "and --spool-pvc: give one")
	}
	for _, c := range o.CIDRs {
		if _, err := netip.ParsePrefix(c); err != nil {
			bad("cluster-cidr/--service-cidr", "%q is not a CIDR range (10.0.0.0/8)", c)
		}
	}
	for _, h := range o.NoProxy {
		if h == "" || strings.ContainsAny(h, ", \t") {
			bad("no-proxy", "%q: give one host, domain (.example.com) or range per value", h)
		}
	}
	if strings.Count(o.RedisPasswordSecret, ":") > 1 {
		bad("redis-password-secret", "want NAME or NAME:KEY, got %q", o.RedisPasswordSecret)
	}
	errs = append(errs, o.checkCapture()...)
	errs = append(errs, o.checkInbound()...)
	return r, errors.Join(errs...)
}

type resources struct{ cpuReq, memReq, cpuLim, memLim, spool, claim *resource.Quantity }

// noProxy is the NO_PROXY list.
func (o *Options) noProxy() []string {
	return append(append(append([]string{}, DefaultNoProxy...), o.CIDRs...), o.NoProxy...)
}

// javaNonProxyHosts is noProxy as Java's http.nonProxyHosts: "|"
// between patterns, "*" for a domain suffix, and no CIDR ranges (Java has
// none).
func javaNonProxyHosts(hosts []string) string {
	var out []string
	for _, h := range hosts {
		if _, err := netip.ParsePrefix(h); err == nil {
			continue
		}
		if strings.HasPrefix(h, ".") {
			h = "*" + h
		}
		out = append(out, h)
	}
	return strings.Join(out, "|")
}

// goMemLimit is 3/4 of the memory limit, as the chart sets it.
func goMemLimit(limit *resource.Quantity) string {
	if limit == nil {
		return ""
	}
	b := limit.Value() / 4 * 3
	if b%(1<<20) == 0 {
		return fmt.Sprintf("%dMiB", b>>20)
	}
	return fmt.Sprint(b)
}

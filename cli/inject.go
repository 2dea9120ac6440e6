package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/hookpace/hookpace/inject"
)

// stdin is what "hookpace inject" reads without -f, or with -f -.
var stdin io.Reader = os.Stdin

// listFlag is a flag that may be given many times; each value may also
// be a comma-separated list.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	*l = append(*l, strings.Split(v, ",")...)
	return nil
}

// fileFlag is -f: repeatable, one file each.
type fileFlag []string

func (l *fileFlag) String() string     { return strings.Join(*l, " ") }
func (l *fileFlag) Set(v string) error { *l = append(*l, v); return nil }

func injectCmd(args []string, stdout, stderr io.Writer) error {
	o := inject.Defaults()
	fs := newFlags("inject")
	var files fileFlag
	var cidrs, services listFlag
	fs.Var(&files, "f", "manifest `FILE` to read, - for stdin (repeatable; default stdin)")
	injectFlags(fs, &o, &cidrs, &services)
	inputs, closeAll, err := parseFiles(fs, args, &files)
	if err != nil {
		return err
	}
	defer closeAll()
	o.CIDRs = append(cidrs, services...)
	in, err := inject.New(o)
	if err != nil {
		return err
	}
	if err := in.Inject(stdout, stderr, inputs...); err != nil {
		return fmt.Errorf("nothing written:\n%w", err)
	}
	return nil
}

// parseFiles parses a manifest command's flags (no arguments: files go
// after -f) and opens its -f files; closeAll closes them.
func parseFiles(fs *flag.FlagSet, args []string, files *fileFlag) (inputs []inject.Input, closeAll func(), err error) {
	if err := parse(fs, args); err != nil {
		return nil, nil, err
	}
	if fs.NArg() > 0 {
		return nil, nil, usageError{"unexpected argument " + fs.Arg(0) + " (files go after -f)"}
	}
	return openInputs(*files)
}

// openInputs opens the -f files (none: stdin); closeAll closes them.
func openInputs(files fileFlag) (inputs []inject.Input, closeAll func(), err error) {
	if len(files) == 0 {
		files = fileFlag{"-"}
	}
	var open []*os.File
	closeAll = func() {
		for _, f := range open {
			f.Close()
		}
	}
	for _, f := range files {
		if f == "-" {
			inputs = append(inputs, inject.Input{Name: "stdin", R: stdin})
			continue
		}
		fh, err := os.Open(f)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		open = append(open, fh)
		inputs = append(inputs, inject.Input{Name: f, R: fh})
	}
	return inputs, closeAll, nil
}

func uninjectCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("uninject")
	var files fileFlag
	fs.Var(&files, "f", "manifest `FILE` to read, - for stdin (repeatable; default stdin)")
	inputs, closeAll, err := parseFiles(fs, args, &files)
	if err != nil {
		return err
	}
	defer closeAll()
	if err := inject.Uninject(stdout, stderr, inputs...); err != nil {
		return fmt.Errorf("nothing written:\n%w", err)
	}
	return nil
}

// injectFlags are inject's flags, on the command line and, for one Pod,
// as the injector's annotations; cidrs and services collect
// --cluster-cidr and --service-cidr.
func injectFlags(fs *flag.FlagSet, o *inject.Options, cidrs, services *listFlag) {
	fs.StringVar(&o.Image, "image", o.Image, "hookpace's image")
	fs.StringVar(&o.ConfigMap, "configmap", o.ConfigMap, "`NAME` of the ConfigMap holding config.yaml (the chart's sidecar mode renders it)")
	fs.IntVar(&o.ProxyPort, "proxy-port", o.ProxyPort, "the config's listen port, on 127.0.0.1 or a wildcard address")
	fs.IntVar(&o.AdminPort, "admin-port", o.AdminPort, "the config's admin port (for the probes)")
	fs.StringVar(&o.SpoolDir, "spool-dir", o.SpoolDir, "the config's spool.dir; the spool volume is mounted there")
	fs.StringVar(&o.SpoolPVC, "spool-pvc", "", "an existing PersistentVolumeClaim `NAME` for the spool (one pod only); default an emptyDir")
	fs.StringVar(&o.SpoolSize, "spool-size", o.SpoolSize, "the spool emptyDir's sizeLimit (empty: none)")
	fs.StringVar(&o.SpoolClaim, "spool-volume-claim", "", "StatefulSets: a claim of `SIZE` (1Gi) per pod for the spool, from a volumeClaimTemplate")
	fs.BoolVar(&o.AcceptLoss, "accept-loss", false, "inject Jobs and CronJobs without a hand-off target: what is queued when they finish is lost")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "the config's shutdown.timeout (drain and hand-off)")
	fs.DurationVar(&o.AppStop, "app-stop", o.AppStop, "how long the app takes to stop after SIGTERM; hookpace stops after it")
	fs.StringVar(&o.HandoffSecret, "handoff-secret", "", "Secret `NAME` with key handoff-credentials, mounted for shutdown.handoff_auth_file")
	fs.StringVar(&o.AdminTokenSecret, "admin-token-secret", "", "Secret `NAME` with key token, mounted for admin.token_file (the chart's ServiceMonitor)")
	fs.StringVar(&o.RedisPasswordSecret, "redis-password-secret", "", "Secret `NAME[:KEY]` (key redis-password) for HOOKPACE_REDIS_PASSWORD (fleet mode)")
	fs.StringVar(&o.FleetRedis, "fleet-redis", "", "`URL` set as fleet.redis in the ConfigMap's config.yaml (give the ConfigMap with -f): pacing shared by the replicas")
	fs.StringVar(&o.CPURequest, "cpu-request", o.CPURequest, "hookpace's CPU request (empty: none)")
	fs.StringVar(&o.MemoryRequest, "memory-request", o.MemoryRequest, "hookpace's memory request (empty: none)")
	fs.StringVar(&o.CPULimit, "cpu-limit", o.CPULimit, "hookpace's CPU limit (empty: none)")
	fs.StringVar(&o.MemoryLimit, "memory-limit", o.MemoryLimit, "hookpace's memory limit; GOMEMLIMIT is 3/4 of it (empty: none)")
	fs.BoolVar(&o.ReadinessProbe, "readiness-probe", false, "probe /readyz too (while the spool refuses, the whole pod leaves its Services)")
	fs.Var((*listFlag)(&o.NoProxy), "no-proxy", "`HOSTS` the apps reach directly, added to NO_PROXY (repeatable, comma-separated)")
	fs.Var(cidrs, "cluster-cidr", "the cluster's pod `CIDR` range(s), added to NO_PROXY")
	fs.Var(services, "service-cidr", "the cluster's service `CIDR` range(s), added to NO_PROXY")
	fs.Var((*listFlag)(&o.NoTrust), "no-trust", "`CONTAINER` that gets no trust variables nor trust mount (repeatable; * for all)")
	fs.BoolVar(&o.Java, "java", false, "add JAVA_TOOL_OPTIONS with the proxy, nonProxyHosts and the trust store")
	fs.BoolVar(&o.InitContainers, "init-containers", false, "give the app's init containers the variables too")
	captureFlags(fs, &o.CaptureOptions)
	fs.Func("inbound", "put hookpace's inbound listener in front of the app's container `PORT`, or PORT:LISTEN (default LISTEN: PORT+10000): "+
		"a sidecar port named "+inject.InboundPortPrefix+"PORT, a route in the ConfigMap, and the Services' targetPort moved to it (repeatable, comma-separated)", func(s string) error {
		for _, v := range strings.Split(s, ",") {
			p, err := inject.ParseInboundPort(v)
			if err != nil {
				return err
			}
			o.Inbound = append(o.Inbound, p)
		}
		return nil
	})
	fs.BoolVar(&o.InboundTargetNumber, "inbound-target-number", false, "move Services' targetPort to the number of hookpace's inbound port, not its name "+
		"(Kubernetes before 1.32 does not resolve a native sidecar's named port for a Service)")
	fs.StringVar(&o.InboundSecret, "inbound-secret", "", "Secret `NAME` mounted in hookpace at "+inject.InboundSecretDir+", for the inbound routes' verify.secret_file")
}

func checkCmd(args []string, stdout io.Writer) error {
	fs := newFlags("check")
	var files fileFlag
	o := inject.CheckOptions{}
	fs.Var(&files, "f", "manifest `FILE` to read, - for stdin (repeatable; default stdin): kubectl get -o yaml output works")
	fs.StringVar(&o.Image, "image", inject.DefaultImage, "the hookpace `IMAGE` every injected pod should run")
	fs.StringVar(&o.ConfigMap, "configmap", inject.Defaults().ConfigMap, "`NAME` of hookpace's ConfigMap (fleet.redis, shutdown.handoff)")
	inputs, closeAll, err := parseFiles(fs, args, &files)
	if err != nil {
		return err
	}
	defer closeAll()
	found, err := inject.Check(o, inputs...)
	if err != nil {
		return err
	}
	for _, f := range found {
		fmt.Fprintln(stdout, f)
	}
	if len(found) > 0 {
		return fmt.Errorf("%d finding(s)", len(found))
	}
	fmt.Fprintln(stdout, "no findings")
	return nil
}

// captureFlags are hookpace inject's --capture flags.
func captureFlags(fs *flag.FlagSet, c *inject.CaptureOptions) {
	fs.BoolVar(&c.Capture, "capture", false, "add the init container "+inject.CaptureContainerName+
		" that redirects the pod's outbound TCP to hookpace's capture.listen (NET_ADMIN and NET_RAW while it runs); app containers get only the trust variables")
	fs.IntVar(&c.Port, "capture-port", c.Port, "the config's capture.listen port")
	fs.Func("capture-ports", fmt.Sprintf("destination TCP `PORTS` redirected, comma-separated (default %s)", joinInts(c.Ports)), func(s string) error {
		c.Ports = nil
		for _, p := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(p))
			if err != nil {
				return fmt.Errorf("%q is not a port", p)
			}
			c.Ports = append(c.Ports, n)
		}
		return nil
	})
	fs.StringVar(&c.Image, "capture-image", c.Image, "the init container's image: hookpace and iptables (the Dockerfile's capture-init target)")
	fs.Int64Var(&c.UID, "capture-uid", c.UID, "hookpace's uid with --capture, excluded from the redirect; no app container may run as it")
	fs.BoolVar(&c.ProxyEnv, "proxy-env", false, "with --capture, keep the proxy variables (and Java's proxy properties) for runtimes that honour them")
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

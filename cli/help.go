package cli

import (
	"flag"
	"fmt"
	"io"
)

// commandHelp is the first lines of "hookpace CMD --help"; the flags that
// the command's FlagSet defines follow them, printed from the FlagSet
// itself so that they cannot drift from what the command accepts.
var commandHelp = map[string]string{
	"run": `Usage: hookpace [run] [--config FILE]

Runs the proxy, the deliverer and the admin API until SIGTERM or SIGINT
(a second signal exits at once; queued messages stay in the spool).
SIGHUP reloads the config. Without --config the embedded defaults apply.
`,
	"check-config": `Usage: hookpace check-config FILE

Validates a config file: exit 0 and a one-line summary, or exit 1 and the
errors, each naming the field and the line.
`,
	"ca": `Usage: hookpace ca bundle [--config FILE]
       hookpace ca cert [--config FILE]
       hookpace ca init --dir DIR (--hosts NAME,... | --unconstrained)

hookpace intercepts https:// webhooks with its own CA. It creates the CA
on its first start, in the spool directory (spool.dir/mitm, key mode
0600), and writes what apps need to trust it to mitm.public_dir (default
spool.dir/trust), never the key. With defaults.connect: mitm the CA is
open-world (mitm.scope: open): it vouches for any DNS name, minting leaves
on demand, is never re-issued as hosts come and go, and its critical name
constraints exclude every IP address and cluster.local, svc, internal,
local and mitm.exclude. Otherwise it is constrained to the hosts named in
the config (connect: mitm) and re-issued when they grow (docs/https.md).

  ca bundle   prints the path of the trust bundle: the system roots plus
              the CA (PEM). Point the app at it with one variable:
                SSL_CERT_FILE       Go, OpenSSL, Ruby, Python httpx
                REQUESTS_CA_BUNDLE  Python requests (httpx ignores it)
                CURL_CA_BUNDLE      curl
                NODE_EXTRA_CA_CERTS Node
              Java: truststore.p12 beside it (docs/https.md,
              "Trusting it").
  ca cert     prints the path of the CA certificate alone.
  ca init     creates a CA of your own instead: DIR/ca.crt and DIR/ca.key
              (mode 0600); point mitm.ca_cert and mitm.ca_key at them and
              have your apps trust DIR/ca.crt. --hosts gives it name
              constraints as hookpace's own has; --unconstrained (required
              without --hosts) makes one that vouches for every name and
              IP, and hookpace warns at every start. Replicas behind one
              Service (a gateway) need one CA: this one, shared.

The config is --config FILE, else $HOOKPACE_CONFIG, else the embedded
defaults. bundle and cert work while hookpace runs, and say what to do
when the CA does not exist yet.
`,
	"sign": `Usage: hookpace sign public-key [--config FILE] --host HOST

Prints the public key that verifies the v1a (Ed25519) signatures hookpace
sends to HOST (sign: {scheme: standard-webhooks-v1a}), in Standard
Webhooks' form: whpk_ followed by base64 of the 32-byte key; one line per
key, two during a rotation (key_files). Give it to the partner. When the
host uses hookpace's own key (no key_file) and there is none yet, it is
created beside the spool (spool.dir/sign/ed25519.pem, mode 0600), the key a
start then signs with. The config is --config FILE, else $HOOKPACE_CONFIG.
`,
	"status": `Usage: hookpace status [--json] [--host TEXT] [--fleet] [--admin ADDR | --config FILE]

Prints the spool's usage and one row per host: queued, in flight, rate,
hold, breaker and last error. --host keeps the hosts whose name contains
TEXT (any case). The same data, live, is on the status page at
http://ADMIN/.

In fleet mode, --fleet prints the whole fleet's hosts instead: per host,
the totals over the live replicas (queued, in flight, delivered, dead
letters, paused/held/breaker) and each replica's queued/in flight, from
the summaries the replicas publish to Redis with their heartbeat (a few
seconds old at most).
`,
	"pause": `Usage: hookpace pause HOST [--admin ADDR | --config FILE]

Stops sending to HOST; its webhooks are still accepted and spooled. The
pause is stored in the spool and holds across restarts until resume.
`,
	"resume": `Usage: hookpace resume HOST [--admin ADDR | --config FILE]

Lets HOST send again after a pause.
`,
	"health": `Usage: hookpace health [--ready] [--admin ADDR | --config FILE]

Exit 0 if the admin API answers /healthz (with --ready: /readyz); for
container probes.
`,
	"capture": `Usage: hookpace capture rules --to PORT --exclude-uid UID [--ports 80,443]
                              [--exclude-cidr CIDR]... [--apply]

Capture mode: the kernel redirects the apps' outbound TCP to ports 80 and
443 to hookpace's capture listener (capture.listen), so that every client
goes through hookpace whatever it does with proxy variables. Prints the
iptables-restore input (nat table, chain HOOKPACE_OUTPUT, IPv4 then IPv6),
or with --apply applies it in the current network namespace (needs
NET_ADMIN and NET_RAW; applying again replaces the chain's rules).
Not captured: processes of --exclude-uid (hookpace's own uid: its
deliveries must go out, not back into it), loopback, and each
--exclude-cidr. Check for no loop with: iptables -t nat -L HOOKPACE_OUTPUT -v -n
(the uid-owner RETURN rule's packets grow as hookpace delivers).
See docs/capture.md.
`,
	"inject": `Usage: hookpace inject [-f FILE]... [flags] > injected.yaml

Adds hookpace to Kubernetes manifests: Deployments, StatefulSets,
DaemonSets, Jobs, CronJobs and Pods, also in Lists and multi-document
streams (other objects pass through unchanged). Reads the files named by
-f (- or none: stdin) and writes one stream to stdout, with everything it
does not add left as it was; a line per object on stderr says what it did.
To each pod template it adds:
  - hookpace as a native sidecar: the first init container, named hookpace,
    with restartPolicy: Always (Kubernetes 1.29 or later; 1.28 with the
    SidecarContainers feature gate), its probes, resources and a
    non-root, read-only securityContext;
  - the volumes hookpace-spool (emptyDir, or --spool-pvc) and
    hookpace-config (the ConfigMap --configmap, mounted as a directory,
    so edits reach hookpace's file watch without a restart);
  - on every app container: HTTP_PROXY, HTTPS_PROXY (and lower case) =
    http://127.0.0.1:PORT; NO_PROXY (and no_proxy) = localhost, 127.0.0.1,
    ::1, .svc, .svc.cluster.local, .cluster.local, 169.254.169.254,
    metadata.google.internal, --cluster-cidr, --service-cidr and --no-proxy;
    SSL_CERT_FILE, CURL_CA_BUNDLE, REQUESTS_CA_BUNDLE and
    NODE_EXTRA_CA_CERTS (bundle.pem) from hookpace's trust directory, mounted
    read-only at /var/run/hookpace/trust (--no-trust=CONTAINER: none);
  - terminationGracePeriodSeconds of at least --app-stop +
    --shutdown-timeout + 10 s, and the annotations hookpace.dev/injected
    and hookpace.dev/injected-parts (what it added, for uninject and
    upgrades).
Its output injected again with the same flags is unchanged; with other
flags (a new --image) hookpace's parts are replaced and nothing else, so
a new version rolls out as: hookpace inject --image NEW -f injected.yaml.
hookpace uninject takes them out again. Jobs and CronJobs are refused
without a hand-off target (shutdown.handoff in the ConfigMap given with
-f, or --handoff-secret) or --accept-loss: what is queued when their
containers finish would be lost. It refuses, writing nothing, an
object that has a container, volume, port or proxy variable of these
names that it did not add. The ports, spool dir and shutdown timeout must
match config.yaml in the ConfigMap (the chart's sidecar mode prints them).

Example:
  helm install hooks charts/hookpace          # the ConfigMap "hookpace"
  hookpace inject -f deploy.yaml --service-cidr 10.96.0.0/12 | kubectl apply -f -
  kubectl get deploy web -o yaml | hookpace inject | kubectl apply -f -
`,
	"injector": `Usage: hookpace injector --tls-cert FILE --tls-key FILE [--listen ADDR] [inject's flags]

Serves hookpace's mutating admission webhook over HTTPS (the chart's
injector.enabled runs it): an AdmissionReview (admission.k8s.io/v1) for a
Pod being created is answered with a JSONPatch that adds exactly what
hookpace inject adds to that Pod.
  POST /inject            Pods labelled hookpace.dev/inject=enabled
  POST /inject/namespace  any Pod (the webhook's namespaceSelector chose
                          it) unless labelled hookpace.dev/inject=disabled
  GET  /healthz
Never a Pod in kube-system or in --namespace (its own), nor one that
hookpace inject injected already (hookpace.dev/injected). inject's flags
are the defaults for every Pod; a Pod's annotations hookpace.dev/FLAG
(hookpace.dev/java: "true") set the others for that Pod, except image,
fleet-redis and spool-volume-claim. A Pod refused by inject (a Job's
without a hand-off target, a clash of names, a bad annotation) is denied
with the reason. One JSON log line per review. See docs/kubernetes.md.
`,
	"check": `Usage: hookpace check [-f FILE]... [--image IMAGE] [--configmap NAME]

Reads Kubernetes manifests, or a cluster's objects as exported by
  kubectl get ns,cm,deploy,sts,ds,job,cronjob,pod -A -o yaml
and prints one line per finding:
  - an injected pod (template) whose hookpace image is not --image;
  - a pod labelled hookpace.dev/inject=enabled, or in a Namespace so
    labelled (given among the objects), without the hookpace container:
    created while the injector was down or before it was installed;
  - an injected workload of more than one pod (replicas, parallelism, a
    DaemonSet) whose namespace's ConfigMap sets no fleet.redis, or is not
    among the objects;
  - an injected Job, CronJob or Job's pod with no hand-off target
    (shutdown.handoff in the ConfigMap, or the hand-off Secret mounted).
Exit 0 with "no findings", 1 with findings.
`,
	"uninject": `Usage: hookpace uninject [-f FILE]... > plain.yaml

Takes out of Kubernetes manifests what hookpace inject added to them, as
the annotation hookpace.dev/injected-parts records it: the sidecar, its
volumes (and volumeClaimTemplate), the variables and trust mount on the
app's containers, the fields inject created, the terminationGracePeriodSeconds
and fsGroup it set, and both annotations. What was edited since (another
variable, a volume) stays. Objects that were not injected, and ConfigMaps,
pass through unchanged. Reads -f files (- or none: stdin), writes one
stream to stdout; nothing if an object's record cannot be read.

Example:
  hookpace uninject -f injected.yaml | kubectl apply -f -
`,
	"dead": `Usage:
  hookpace dead list [--host H] [--limit N] [--json]
  hookpace dead replay (--all | --host H | ID... | --since T [--until T])
  hookpace dead purge  (--all | --host H | ID... | --since T [--until T])

Lists, replays (puts back into their host's queue) or deletes dead letters.
replay and purge act on nothing unless told which. --since and --until
bound when they died: an RFC 3339 time or a duration ago (1h), and
combine with --host.
`,
	"version": `Usage: hookpace version

Prints the version, the commit it was built from and the Go version.
`,
}

// helpError carries the FlagSet of a command asked for --help.
type helpError struct{ fs *flag.FlagSet }

func (helpError) Error() string { return flag.ErrHelp.Error() }
func (helpError) Unwrap() error { return flag.ErrHelp }

func isHelp(arg string) bool { return arg == "-h" || arg == "--help" || arg == "-help" }

// printHelp prints the help of cmd and the flags of fs (nil: none).
func printHelp(out io.Writer, cmd string, fs *flag.FlagSet) {
	text, ok := commandHelp[cmd]
	if !ok {
		fmt.Fprint(out, usage)
		return
	}
	fmt.Fprint(out, text)
	if fs == nil {
		return
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(out, "\nFlags:")
	fs.SetOutput(out)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

package inject

import (
	"fmt"
	"path"
	"strings"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// sidecar is hookpace's container: a native sidecar (an init container
// that keeps running), started before the app and stopped after it, with
// the probes and the securityContext of the chart's gateway.
func (in *Injector) sidecar() *yaml.Node {
	o := in.o
	always := corev1.ContainerRestartPolicyAlways
	admin := fmt.Sprintf("127.0.0.1:%d", o.AdminPort)
	// The admin API listens on the pod's localhost, which the kubelet's
	// httpGet cannot reach: the probes run hookpace health inside.
	probe := func(period, failures int32, ready bool) *corev1.Probe {
		cmd := []string{binary, "health", "--admin", admin}
		if ready {
			cmd = []string{binary, "health", "--ready", "--admin", admin}
		}
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}},
			PeriodSeconds: period, FailureThreshold: failures}
	}
	c := corev1.Container{
		Name:          ContainerName,
		Image:         o.Image,
		RestartPolicy: &always,
		Args:          []string{"run", "--config", configDir + "/config.yaml"},
		Ports:         []corev1.ContainerPort{{Name: ProxyPortName, ContainerPort: int32(o.ProxyPort), Protocol: corev1.ProtocolTCP}},
		StartupProbe:  probe(1, 30, false),
		LivenessProbe: probe(10, 0, false),
		Resources:     corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             ptr(true),
			RunAsUser:                ptr(in.hookpaceUID()),
			RunAsGroup:               ptr(int64(nonRootID)),
			ReadOnlyRootFilesystem:   ptr(true),
			AllowPrivilegeEscalation: ptr(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: ConfigVolume, MountPath: configDir, ReadOnly: true},
			{Name: SpoolVolume, MountPath: o.SpoolDir},
		},
	}
	c.Ports = append(c.Ports, in.inboundPorts()...)
	if o.InboundSecret != "" {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: InboundSecretVolume, MountPath: InboundSecretDir, ReadOnly: true})
	}
	if o.ReadinessProbe {
		c.ReadinessProbe = probe(5, 0, true)
	}
	if o.AdminTokenSecret != "" {
		// The chart's ServiceMonitor: admin on the pod's addresses, behind the token.
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: AdminPortName, ContainerPort: int32(o.AdminPort), Protocol: corev1.ProtocolTCP})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: TokenVolume, MountPath: tokenDir, ReadOnly: true})
	}
	if o.HandoffSecret != "" {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: HandoffVolume, MountPath: handoffDir, ReadOnly: true})
	}
	for name, q := range map[corev1.ResourceName]*resource.Quantity{corev1.ResourceCPU: in.r.cpuReq, corev1.ResourceMemory: in.r.memReq} {
		if q != nil {
			c.Resources.Requests[name] = *q
		}
	}
	for name, q := range map[corev1.ResourceName]*resource.Quantity{corev1.ResourceCPU: in.r.cpuLim, corev1.ResourceMemory: in.r.memLim} {
		if q != nil {
			c.Resources.Limits[name] = *q
		}
	}
	if m := goMemLimit(in.r.memLim); m != "" {
		// Go's soft heap limit, below the container's: the GC works harder
		// near it rather than the container being killed.
		c.Env = append(c.Env, corev1.EnvVar{Name: "GOMEMLIMIT", Value: m})
	}
	if s := o.RedisPasswordSecret; s != "" {
		name, key, ok := strings.Cut(s, ":")
		if !ok {
			key = "redis-password"
		}
		// The chart's fleet.redis_password_env.
		c.Env = append(c.Env, corev1.EnvVar{Name: "HOOKPACE_REDIS_PASSWORD", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}}})
	}
	return toNode(c, "name", "image", "restartPolicy", "args", "ports", "env", "startupProbe", "livenessProbe",
		"readinessProbe", "resources", "securityContext", "volumeMounts")
}

// volumes are the pod volumes the sidecar mounts.
func (in *Injector) volumes() []*yaml.Node {
	o := in.o
	spool := corev1.Volume{Name: SpoolVolume}
	if o.SpoolPVC != "" {
		spool.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: o.SpoolPVC}
	} else {
		spool.EmptyDir = &corev1.EmptyDirVolumeSource{SizeLimit: in.r.spool}
	}
	// The ConfigMap as a directory, not a subPath: the kubelet then swaps
	// in a new config.yaml when the ConfigMap changes, and hookpace's file
	// watch reloads it without a restart.
	vols := []corev1.Volume{spool, {Name: ConfigVolume, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: o.ConfigMap}}}}}
	if o.HandoffSecret != "" {
		vols = append(vols, corev1.Volume{Name: HandoffVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: o.HandoffSecret, Items: []corev1.KeyToPath{{Key: "handoff-credentials", Path: "handoff-credentials"},
				{Key: "handoff-secret", Path: "handoff-secret"}}}}})
	}
	if o.AdminTokenSecret != "" {
		vols = append(vols, corev1.Volume{Name: TokenVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: o.AdminTokenSecret, Items: []corev1.KeyToPath{{Key: "token", Path: "token"}}}}})
	}
	if o.InboundSecret != "" {
		vols = append(vols, corev1.Volume{Name: InboundSecretVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: o.InboundSecret}}})
	}
	if o.SpoolClaim != "" {
		vols = vols[1:] // the StatefulSet's volumeClaimTemplate names the pod's spool volume
	}
	nodes := make([]*yaml.Node, len(vols))
	for i, v := range vols {
		nodes[i] = toNode(v, "name")
	}
	return nodes
}

// appEnv is what an app container gets: the proxy, the exceptions, and
// (unless trust is false) the variables that make its runtime trust
// hookpace's CA.
func (in *Injector) appEnv(trust bool) []corev1.EnvVar {
	o := in.o
	proxy := fmt.Sprintf("http://127.0.0.1:%d", o.ProxyPort)
	noProxy := o.noProxy()
	var env []corev1.EnvVar
	if in.proxyEnv() {
		env = []corev1.EnvVar{
			{Name: "HTTP_PROXY", Value: proxy}, {Name: "http_proxy", Value: proxy},
			{Name: "HTTPS_PROXY", Value: proxy}, {Name: "https_proxy", Value: proxy},
			{Name: "NO_PROXY", Value: strings.Join(noProxy, ",")}, {Name: "no_proxy", Value: strings.Join(noProxy, ",")},
		}
	}
	if trust {
		// SSL_CERT_FILE replaces the runtime's roots (Go, OpenSSL, Ruby):
		// the bundle holds the system roots as well as hookpace's CA. Node
		// adds NODE_EXTRA_CA_CERTS to its own roots; the bundle, which
		// exists even while nothing is intercepted (ca.crt does not), keeps
		// it from warning then.
		for _, v := range trustVars {
			env = append(env, corev1.EnvVar{Name: v, Value: path.Join(TrustDir, "bundle.pem")})
		}
		// PHP reads none of them: its scan directory holds an ini file
		// pointing curl and https:// streams at SSL_CERT_FILE. The
		// leading ':' keeps the image's own scan directory (conf.d).
		env = append(env, corev1.EnvVar{Name: phpVar, Value: ":" + path.Join(TrustDir, "php")})
	}
	if o.Java || (trust && !in.proxyEnv()) {
		// Java reads neither the proxy nor the CA variables. With capture
		// and without the proxy variables, it needs only the trust store,
		// and gets it without --java: its HTTPS is intercepted either way.
		var java []string
		if in.proxyEnv() {
			java = append(java, fmt.Sprintf("-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=%[1]d -Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=%[1]d -Dhttp.nonProxyHosts=%[2]s",
				o.ProxyPort, javaNonProxyHosts(noProxy)))
		}
		if trust {
			java = append(java, "-Djavax.net.ssl.trustStore="+path.Join(TrustDir, "truststore.p12")+
				" -Djavax.net.ssl.trustStoreType=PKCS12 -Djavax.net.ssl.trustStorePassword=changeit")
		}
		if len(java) > 0 {
			env = append(env, corev1.EnvVar{Name: javaVar, Value: strings.Join(java, " ")})
		}
	}
	return env
}

// trustVars are the variables that make a runtime trust hookpace's CA.
var trustVars = []string{"SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"}

// phpVar names the directories PHP reads extra ini files from.
const phpVar = "PHP_INI_SCAN_DIR"

// trustMount shows the spool volume's trust/ directory, read-only, at
// TrustDir; apps never see the rest of the spool, nor the CA key.
func trustMount() *yaml.Node {
	return toNode(corev1.VolumeMount{Name: SpoolVolume, MountPath: TrustDir, SubPath: "trust", ReadOnly: true}, "name")
}

func ptr[T any](v T) *T { return &v }

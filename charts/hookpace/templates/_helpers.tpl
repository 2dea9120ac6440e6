{{/* Name of the gateway's Service, StatefulSet, PDB and Secret. */}}
{{- define "hookpace.gatewayName" -}}
{{ .Release.Name }}-hookpace
{{- end }}

{{- define "hookpace.gatewayLabels" -}}
app.kubernetes.io/name: hookpace
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: gateway
{{- end }}

{{/* Seconds a gateway pod may take to stop: shutdown.timeout, at least
5 s more to close the spool and 5 s of slack (hookpace inject computes the
same for sidecars, plus the app's --app-stop). */}}
{{- define "hookpace.gracePeriod" -}}
{{ int .Values.hookpace.shutdown.timeoutSeconds | add 10 }}
{{- end }}

{{/* The gateway's proxy users, as JSON: gateway.auth.users; none with
gateway.auth.open; else one generated user whose password the gateway's
Secret keeps across upgrades (lookup; helm template makes a new one each
time). Generated once per render: every include sees the same. */}}
{{- define "hookpace.gatewayUsers" -}}
{{- $a := .Values.gateway.auth -}}
{{- if and $a.open $a.users -}}
{{- fail "gateway.auth.open: true and gateway.auth.users: give one (open means no proxy auth)" -}}
{{- end -}}
{{- if $a.users -}}
{{ toJson $a.users }}
{{- else if $a.open -}}
[]
{{- else -}}
{{- if not (hasKey $a "generatedUsers") -}}
{{- $old := lookup "v1" "Secret" .Release.Namespace (include "hookpace.gatewayName" .) -}}
{{- $pw := randAlphaNum 32 -}}
{{- if and $old $old.data (index $old.data "proxy-password") (eq (index $old.data "proxy-username" | default "" | b64dec) "hookpace") -}}
{{- $pw = index $old.data "proxy-password" | b64dec -}}
{{- end -}}
{{- $_ := set $a "generatedUsers" (list (dict "username" "hookpace" "password" $pw)) -}}
{{- end -}}
{{ toJson $a.generatedUsers }}
{{- end -}}
{{- end }}

{{/* The gateway's hand-off secret (shutdown.handoff_secret_file): random,
kept in the gateway's Secret across upgrades, so that a hand-off between
replicas, or from sidecars, keeps the webhook's id. */}}
{{- define "hookpace.gatewayHandoffSecret" -}}
{{- $g := .Values.gateway -}}
{{- if not (hasKey $g "generatedHandoffSecret") -}}
{{- $old := lookup "v1" "Secret" .Release.Namespace (include "hookpace.gatewayName" .) -}}
{{- $s := randAlphaNum 48 -}}
{{- if and $old $old.data (index $old.data "handoff-secret") -}}
{{- $s = index $old.data "handoff-secret" | b64dec -}}
{{- end -}}
{{- $_ := set $g "generatedHandoffSecret" $s -}}
{{- end -}}
{{ $g.generatedHandoffSecret }}
{{- end }}

{{/* The settings hookpace applies only when it starts (config.RestartRequired
warns "restart to apply" for each; a test keeps this list complete): a
checksum of just these rolls the gateway's pods. Every other setting
reaches the pods through the mounted file and hookpace's reload. */}}
{{- define "hookpace.restartChecksum" -}}
{{- $cfg := include "hookpace.config" . | fromYaml -}}
{{- $r := dict -}}
{{- range $p := include "hookpace.restartFields" . | splitList " " -}}
{{- $v := $cfg -}}
{{- range $k := splitList "." $p -}}
{{- if kindIs "map" $v -}}{{- $v = get $v $k -}}{{- else -}}{{- $v = "" -}}{{- end -}}
{{- end -}}
{{- $_ := set $r $p $v -}}
{{- end -}}
{{ toJson $r | sha256sum }}
{{- end }}

{{/* Config paths that need a restart; a section name covers all of it. */}}
{{- define "hookpace.restartFields" -}}
listen admin proxy.max_connections spool.dir spool.max_header_bytes spool.min_free log.format dedupe.max_keys dedupe.max_bytes mitm.ca_cert mitm.ca_key mitm.cache_size mitm.public_dir tls.ca_file telemetry fleet journal delivery.max_in_flight delivery.max_idle_connections delivery.idle_connection_timeout events capture.listen inbound spool.replicate
{{- end }}

{{/* The handoff URL in force, or "". */}}
{{- define "hookpace.handoff" -}}
{{- if .Values.hookpace.shutdown.handoff -}}
{{ .Values.hookpace.shutdown.handoff }}
{{- else if and (eq .Values.mode "gateway") .Values.gateway.handoffToService -}}
http://{{ include "hookpace.gatewayName" . }}.{{ .Release.Namespace }}.svc.cluster.local:{{ .Values.gateway.port }}
{{- end -}}
{{- end }}

{{/* hookpace's config.yaml: hookpace.config with the shutdown section, and
in gateway mode its listener and proxy users. */}}
{{- define "hookpace.config" -}}
{{- $v := .Values -}}
{{- if not (has $v.mode (list "sidecar" "gateway")) -}}
{{- fail (printf "mode: want sidecar or gateway, got %q" $v.mode) -}}
{{- end -}}
{{- if hasKey $v.hookpace.config "shutdown" -}}
{{- fail "hookpace.config.shutdown: set hookpace.shutdown instead (the chart derives the grace period from it)" -}}
{{- end -}}
{{- $sh := $v.hookpace.shutdown -}}
{{- $timeout := int $sh.timeoutSeconds -}}
{{- $drain := int (default 0 $sh.drainSeconds) -}}
{{- $handoff := include "hookpace.handoff" . -}}
{{- $users := list -}}
{{- if eq $v.mode "gateway" -}}{{- $users = include "hookpace.gatewayUsers" . | fromJsonArray -}}{{- end -}}
{{- if and $handoff (hasKey $sh "drainSeconds") (lt (sub $timeout $drain) 5) -}}
{{- fail (printf "hookpace.shutdown.drainSeconds: %d leaves %d s of timeoutSeconds (%d) for the hand-off; it needs at least 5" $drain (sub $timeout $drain) $timeout) -}}
{{- end -}}
{{- $cfg := deepCopy $v.hookpace.config -}}
{{- $shutdown := dict "timeout" (printf "%ds" $timeout) -}}
{{- if hasKey $sh "drainSeconds" -}}{{- $_ := set $shutdown "drain" (printf "%ds" $drain) -}}{{- end -}}
{{- if $handoff -}}
{{- $_ := set $shutdown "handoff" $handoff -}}
{{- if $sh.handoffSecret -}}
{{- $_ := set $shutdown "handoff_auth_file" "/etc/hookpace-handoff/handoff-credentials" -}}
{{- $_ := set $shutdown "handoff_secret_file" "/etc/hookpace-handoff/handoff-secret" -}}
{{- else if and (eq $v.mode "gateway") $users (not $sh.handoff) -}}
{{- $_ := set $shutdown "handoff_auth_file" "/etc/hookpace/handoff-credentials" -}}
{{- end -}}
{{- else if $sh.handoffSecret -}}
{{- fail "hookpace.shutdown.handoffSecret: set without a hand-off target (hookpace.shutdown.handoff)" -}}
{{- end -}}
{{- if eq $v.mode "gateway" -}}
{{- /* A replica receives hand-offs (from the others, from sidecars) and keeps their ids. */ -}}
{{- $_ := set $shutdown "handoff_secret_file" "/etc/hookpace/handoff-secret" -}}
{{- end -}}
{{- $_ := set $cfg "shutdown" $shutdown -}}
{{- with $v.hookpace.fleet -}}
{{- $named := 0 -}}
{{- range $k := list "redis" "cluster" "sentinel" -}}{{- if index $v.hookpace.fleet $k -}}{{- $named = add1 $named -}}{{- end -}}{{- end -}}
{{- if gt $named 1 -}}
{{- fail "hookpace.fleet: set one of redis, cluster and sentinel" -}}
{{- end -}}
{{- if eq $named 1 -}}
{{- $fleet := dict -}}
{{- if kindIs "map" $cfg.fleet -}}{{- $fleet = $cfg.fleet -}}{{- end -}}
{{- with .redis -}}{{- $_ := set $fleet "redis" . -}}{{- end -}}
{{- with .cluster -}}{{- $_ := set $fleet "cluster" . -}}{{- end -}}
{{- with .sentinel -}}{{- $_ := set $fleet "sentinel" . -}}{{- end -}}
{{- if .passwordSecret -}}{{- $_ := set $fleet "redis_password_env" "HOOKPACE_REDIS_PASSWORD" -}}{{- end -}}
{{- $_ := set $cfg "fleet" $fleet -}}
{{- else if .passwordSecret -}}
{{- fail "hookpace.fleet.passwordSecret: set without hookpace.fleet.redis, cluster or sentinel" -}}
{{- end -}}
{{- end -}}
{{- if $v.monitoring.serviceMonitor.enabled -}}
{{- /* Prometheus scrapes /metrics on the pod's address; the token keeps the rest closed. */ -}}
{{- $admin := dict -}}
{{- if kindIs "map" $cfg.admin -}}{{- $admin = $cfg.admin -}}{{- end -}}
{{- $_ := set $admin "listen" (printf "0.0.0.0:%s" (include "hookpace.adminPortNumber" $)) -}}
{{- $_ := set $admin "token_file" "/etc/hookpace-admin/token" -}}
{{- $_ := set $cfg "admin" $admin -}}
{{- end -}}
{{- if and (eq $v.mode "sidecar") $v.sidecar.capture.enabled -}}
{{- /* Capture: every address of the pod (IPv4 redirects arrive at 127.0.0.1, IPv6 ones at ::1). */ -}}
{{- $capture := dict -}}
{{- if kindIs "map" $cfg.capture -}}{{- $capture = $cfg.capture -}}{{- end -}}
{{- if not $capture.listen -}}{{- $_ := set $capture "listen" (printf ":%d" (int $v.sidecar.capture.port)) -}}{{- end -}}
{{- $_ := set $cfg "capture" $capture -}}
{{- end -}}
{{- if and (eq $v.mode "sidecar") $v.sidecar.inbound -}}
{{- /* A route per app port, from the sidecar's hp-in-PORT, and the app's hosts entry unless the config has one. */ -}}
{{- $routes := list -}}
{{- if kindIs "slice" $cfg.inbound -}}{{- $routes = $cfg.inbound -}}{{- end -}}
{{- $hosts := dict -}}
{{- if kindIs "map" $cfg.hosts -}}{{- $hosts = $cfg.hosts -}}{{- end -}}
{{- range $e := $v.sidecar.inbound -}}
{{- $in := include "hookpace.inboundPort" $e | fromJson -}}
{{- $r := dict "name" (printf "hp-in-%d" (int $in.port)) "listen" (printf ":%d" (int $in.listen)) "to" (printf "http://127.0.0.1:%d" (int $in.port)) -}}
{{- if kindIs "map" $e -}}
{{- range $k := list "paths" "answer" "verify" "dedupe" "sync" "sign" -}}{{- if hasKey $e $k -}}{{- $_ := set $r $k (get $e $k) -}}{{- end -}}{{- end -}}
{{- end -}}
{{- $routes = append $routes $r -}}
{{- $app := printf "127.0.0.1:%d" (int $in.port) -}}
{{- if not (hasKey $hosts $app) -}}{{- $_ := set $hosts $app (dict "rate" "1000/s" "burst" 100 "concurrency" "auto") -}}{{- end -}}
{{- end -}}
{{- $_ := set $cfg "inbound" $routes -}}
{{- $_ := set $cfg "hosts" $hosts -}}
{{- end -}}
{{- if eq $v.mode "gateway" -}}
{{- $_ := set $cfg "listen" (printf "0.0.0.0:%d" (int $v.gateway.port)) -}}
{{- if $v.gateway.mitm.caSecret -}}
{{- $mitm := dict -}}
{{- if kindIs "map" $cfg.mitm -}}{{- $mitm = $cfg.mitm -}}{{- end -}}
{{- $_ := set $mitm "ca_cert" "/etc/hookpace-ca/ca.crt" -}}
{{- $_ := set $mitm "ca_key" "/etc/hookpace-ca/ca.key" -}}
{{- $_ := set $cfg "mitm" $mitm -}}
{{- end -}}
{{- with $users -}}
{{- $_ := set $cfg "auth" (dict "users" .) -}}
{{- end -}}
{{- if $v.gateway.nats.embedded -}}
{{- /* Every replica's server, through the headless Service; the replica's own client connects to its own first, then to the others. */ -}}
{{- $n := $v.gateway.nats -}}
{{- if lt (int $v.gateway.replicas) 3 -}}
{{- fail (printf "gateway.nats.embedded: needs gateway.replicas of 3 or more (a stream of 3 keeps a majority with one replica lost), got %d" (int $v.gateway.replicas)) -}}
{{- end -}}
{{- $gw := include "hookpace.gatewayName" . -}}
{{- $peers := list -}}
{{- $urls := list -}}
{{- range $i := until (int $v.gateway.replicas) -}}
{{- $host := printf "%s-%d.%s-headless.%s.svc.cluster.local" $gw $i $gw $.Release.Namespace -}}
{{- $peers = append $peers (printf "%s:%d" $host (int $n.clusterPort)) -}}
{{- $urls = append $urls (printf "nats://%s:%d" $host (int $n.clientPort)) -}}
{{- end -}}
{{- $spool := dict -}}
{{- if kindIs "map" $cfg.spool -}}{{- $spool = $cfg.spool -}}{{- end -}}
{{- $rep := dict -}}
{{- if kindIs "map" $spool.replicate -}}{{- $rep = $spool.replicate -}}{{- end -}}
{{- $nats := dict -}}
{{- if kindIs "map" $rep.nats -}}{{- $nats = $rep.nats -}}{{- end -}}
{{- $_ := set $nats "embedded" (dict "peers" $peers "listen" (printf "0.0.0.0:%d" (int $n.clientPort)) "cluster_listen" (printf "0.0.0.0:%d" (int $n.clusterPort))) -}}
{{- $_ := set $nats "urls" $urls -}}
{{- $_ := set $rep "nats" $nats -}}
{{- $_ := set $spool "replicate" $rep -}}
{{- $_ := set $cfg "spool" $spool -}}
{{- end -}}
{{- end -}}
{{ toYaml $cfg }}
{{- end }}

{{/* One sidecar.inbound entry (a port, or {port, listenPort, ...}) as
JSON: the app's port, hookpace's port in front of it (default port+10000,
as hookpace inject's), and whether listenPort named it. */}}
{{- define "hookpace.inboundPort" -}}
{{- $port := 0 -}}
{{- $listen := 0 -}}
{{- if kindIs "map" . -}}
{{- $port = int .port -}}
{{- $listen = int (default 0 .listenPort) -}}
{{- else -}}
{{- $port = int . -}}
{{- end -}}
{{- $explicit := ne $listen 0 -}}
{{- if not $explicit -}}{{- $listen = add $port 10000 -}}{{- end -}}
{{- if or (gt (int $listen) 65535) (lt (int $listen) 1024) -}}
{{- fail (printf "sidecar.inbound: port %d: hookpace's port in front of it would be %d; set listenPort from 1024 to 65535" $port (int $listen)) -}}
{{- end -}}
{{ dict "port" $port "listen" $listen "explicit" $explicit | toJson }}
{{- end }}

{{/* Labels of the Service that the ServiceMonitor selects. */}}
{{- define "hookpace.metricsLabels" -}}
app.kubernetes.io/name: hookpace
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: metrics
{{- end }}

{{/* The hookpace container's admin port and token mount, with a ServiceMonitor. */}}
{{- define "hookpace.adminPort" -}}
{{- if .Values.monitoring.serviceMonitor.enabled }}
- {name: admin, containerPort: {{ include "hookpace.adminPortNumber" . }}, protocol: TCP}
{{- end }}
{{- end }}

{{/* The hookpace container's env: GOMEMLIMIT, and the fleet's Redis
password from its Secret. */}}
{{- define "hookpace.env" -}}
{{- $h := .Values.hookpace -}}
{{- if or $h.goMemLimit $h.fleet.passwordSecret -}}
env:
{{- with $h.goMemLimit }}
  # Go's soft heap limit, below the container's memory limit: the
  # GC works harder near it rather than the container being killed.
  - {name: GOMEMLIMIT, value: {{ . | quote }}}
{{- end }}
{{- if $h.fleet.passwordSecret }}
  - name: HOOKPACE_REDIS_PASSWORD
    valueFrom: {secretKeyRef: {name: {{ $h.fleet.passwordSecret | quote }}, key: {{ $h.fleet.passwordKey | quote }}}}
{{- end }}
{{- end -}}
{{- end }}

{{/* The admin listener as hookpace.config sets it ("admin: ADDR" or
"admin: {listen: ADDR}"), or hookpace's default. */}}
{{- define "hookpace.adminListen" -}}
{{- $a := .Values.hookpace.config.admin -}}
{{- if kindIs "map" $a -}}{{- $a = $a.listen -}}{{- end -}}
{{ $a | default "127.0.0.1:9090" }}
{{- end }}

{{/* The admin listener's port. */}}
{{- define "hookpace.adminPortNumber" -}}
{{ regexFind "[0-9]+$" (include "hookpace.adminListen" .) }}
{{- end }}

{{/* The address a process in the pod dials for a listener's HOST:PORT:
a wildcard host (0.0.0.0, ::, none) is reached on 127.0.0.1. */}}
{{- define "hookpace.dialAddr" -}}
{{- $port := regexFind "[0-9]+$" . -}}
{{- $host := trimSuffix (printf ":%s" $port) . -}}
{{- if has $host (list "" "0.0.0.0" "::" "[::]") -}}{{- $host = "127.0.0.1" -}}{{- end -}}
{{ $host }}:{{ $port }}
{{- end }}

{{/* The admin address the probes use: the admin listener in the rendered
config (all of the pod's addresses on the same port with a ServiceMonitor). */}}
{{- define "hookpace.probeAdmin" -}}
{{- if .Values.monitoring.serviceMonitor.enabled -}}
127.0.0.1:{{ include "hookpace.adminPortNumber" . }}
{{- else -}}
{{ include "hookpace.dialAddr" (include "hookpace.adminListen" .) }}
{{- end -}}
{{- end }}

{{/* The flags of hookpace inject that make its sidecars match this
release's config (sidecar mode): only those that differ from inject's
defaults. */}}
{{- define "hookpace.injectFlags" -}}
{{- $v := .Values -}}
{{- $listen := include "hookpace.dialAddr" ($v.hookpace.config.listen | default "127.0.0.1:8080") -}}
{{- if not (or (hasPrefix "127.0.0.1:" $listen) (hasPrefix "localhost:" $listen)) -}}
{{- fail (printf "hookpace.config.listen: %s; in sidecar mode the apps reach hookpace on 127.0.0.1, so listen there (or on a wildcard address)" $v.hookpace.config.listen) -}}
{{- end -}}
{{- if dig "mitm" "public_dir" "" $v.hookpace.config -}}
{{- fail "hookpace.config.mitm.public_dir: in sidecar mode hookpace inject mounts the trust files from <spool.dir>/trust, the default: leave it unset" -}}
{{- end -}}
{{- $flags := list -}}
{{- if ne $v.sidecar.configMap "hookpace" -}}{{- $flags = append $flags (printf "--configmap %s" $v.sidecar.configMap) -}}{{- end -}}
{{- if ne $v.hookpace.image (printf "ghcr.io/hookpace/hookpace:%s" $.Chart.AppVersion) -}}{{- $flags = append $flags (printf "--image %s" $v.hookpace.image) -}}{{- end -}}
{{- $port := regexFind "[0-9]+$" $listen -}}
{{- if ne $port "8080" -}}{{- $flags = append $flags (printf "--proxy-port %s" $port) -}}{{- end -}}
{{- $admin := include "hookpace.adminPortNumber" . -}}
{{- if ne $admin "9090" -}}{{- $flags = append $flags (printf "--admin-port %s" $admin) -}}{{- end -}}
{{- $dir := dig "spool" "dir" "./data" $v.hookpace.config -}}
{{- if ne $dir "/var/lib/hookpace" -}}{{- $flags = append $flags (printf "--spool-dir %s" $dir) -}}{{- end -}}
{{- if ne (int $v.hookpace.shutdown.timeoutSeconds) 30 -}}{{- $flags = append $flags (printf "--shutdown-timeout %ds" (int $v.hookpace.shutdown.timeoutSeconds)) -}}{{- end -}}
{{- with $v.hookpace.shutdown.handoffSecret -}}{{- $flags = append $flags (printf "--handoff-secret %s" .) -}}{{- end -}}
{{- if $v.monitoring.serviceMonitor.enabled -}}{{- $flags = append $flags (printf "--admin-token-secret %s-hookpace-admin" $.Release.Name) -}}{{- end -}}
{{- with $v.hookpace.fleet.passwordSecret -}}{{- $flags = append $flags (printf "--redis-password-secret %s:%s" . $v.hookpace.fleet.passwordKey) -}}{{- end -}}
{{- with $v.sidecar.capture -}}
{{- if .enabled -}}
{{- if not .serviceCIDRs -}}
{{- fail "sidecar.capture.serviceCIDRs: give the cluster's service range (the kube-apiserver's --service-cluster-ip-range): without it the apps' calls to other Services would be captured too" -}}
{{- end -}}
{{- $flags = append $flags "--capture" -}}
{{- $lport := regexFind "[0-9]+$" (dig "capture" "listen" (printf ":%d" (int .port)) $v.hookpace.config) -}}
{{- if ne $lport "15001" -}}{{- $flags = append $flags (printf "--capture-port %s" $lport) -}}{{- end -}}
{{- range .serviceCIDRs -}}{{- $flags = append $flags (printf "--service-cidr %s" .) -}}{{- end -}}
{{- range .clusterCIDRs -}}{{- $flags = append $flags (printf "--cluster-cidr %s" .) -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- range $e := $v.sidecar.inbound -}}
{{- $in := include "hookpace.inboundPort" $e | fromJson -}}
{{- if $in.explicit -}}
{{- $flags = append $flags (printf "--inbound %d:%d" (int $in.port) (int $in.listen)) -}}
{{- else -}}
{{- $flags = append $flags (printf "--inbound %d" (int $in.port)) -}}
{{- end -}}
{{- end -}}
{{- with $v.sidecar.inboundSecret -}}{{- $flags = append $flags (printf "--inbound-secret %s" .) -}}{{- end -}}
{{- if and $v.sidecar.inbound $v.sidecar.inboundTargetNumber -}}{{- $flags = append $flags "--inbound-target-number" -}}{{- end -}}
{{ join " " $flags }}
{{- end }}

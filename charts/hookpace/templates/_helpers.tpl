{{/* Name of the gateway's Service, StatefulSet, PDB and Secret. */}}
{{- define "hookpace.gatewayName" -}}
{{ .Release.Name }}-hookpace
{{- end }}

{{- define "hookpace.gatewayLabels" -}}
app.kubernetes.io/name: hookpace
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: gateway
{{- end }}

{{/* Seconds the pod may take to stop: shutdown.timeout, at least 5 s more
to close the spool and 5 s of slack; in sidecar mode the app stops first. */}}
{{- define "hookpace.gracePeriod" -}}
{{- $s := int .Values.hookpace.shutdown.timeoutSeconds | add 10 -}}
{{- if eq .Values.mode "sidecar" -}}{{- $s = add $s (int .Values.app.stopSeconds) -}}{{- end -}}
{{ $s }}
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
{{- $drain := int $sh.drainSeconds -}}
{{- $handoff := include "hookpace.handoff" . -}}
{{- if and $handoff (lt (sub $timeout $drain) 5) -}}
{{- fail (printf "hookpace.shutdown.drainSeconds: %d leaves %d s of timeoutSeconds (%d) for the hand-off; it needs at least 5" $drain (sub $timeout $drain) $timeout) -}}
{{- end -}}
{{- $cfg := deepCopy $v.hookpace.config -}}
{{- $shutdown := dict "timeout" (printf "%ds" $timeout) "drain" (printf "%ds" $drain) -}}
{{- if $handoff -}}
{{- $_ := set $shutdown "handoff" $handoff -}}
{{- if $sh.handoffSecret -}}
{{- $_ := set $shutdown "handoff_auth_file" "/etc/hookpace-handoff/handoff-credentials" -}}
{{- else if and (eq $v.mode "gateway") $v.gateway.auth.users (not $sh.handoff) -}}
{{- $_ := set $shutdown "handoff_auth_file" "/etc/hookpace/handoff-credentials" -}}
{{- end -}}
{{- else if $sh.handoffSecret -}}
{{- fail "hookpace.shutdown.handoffSecret: set without a hand-off target (hookpace.shutdown.handoff)" -}}
{{- end -}}
{{- $_ := set $cfg "shutdown" $shutdown -}}
{{- with $v.hookpace.fleet -}}
{{- if .redis -}}
{{- $fleet := dict -}}
{{- if kindIs "map" $cfg.fleet -}}{{- $fleet = $cfg.fleet -}}{{- end -}}
{{- $_ := set $fleet "redis" .redis -}}
{{- if .passwordSecret -}}{{- $_ := set $fleet "redis_password_env" "HOOKPACE_REDIS_PASSWORD" -}}{{- end -}}
{{- $_ := set $cfg "fleet" $fleet -}}
{{- else if .passwordSecret -}}
{{- fail "hookpace.fleet.passwordSecret: set without hookpace.fleet.redis" -}}
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
{{- if eq $v.mode "gateway" -}}
{{- $_ := set $cfg "listen" (printf "0.0.0.0:%d" (int $v.gateway.port)) -}}
{{- with $v.gateway.auth.users -}}
{{- $_ := set $cfg "auth" (dict "users" .) -}}
{{- end -}}
{{- end -}}
{{ toYaml $cfg }}
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

{{/* The app's HTTP_PROXY in sidecar mode: hookpace.config.listen. */}}
{{- define "hookpace.proxyURL" -}}
http://{{ include "hookpace.dialAddr" (.Values.hookpace.config.listen | default "127.0.0.1:8080") }}
{{- end }}

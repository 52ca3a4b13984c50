{{/* The namespace of every namespaced object: a DNS label. */}}
{{- define "evictd.namespace" -}}
{{- $ns := required "values: namespace is required" .Values.namespace -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" $ns) -}}
{{- fail (printf "values: namespace %q is not a DNS label" $ns) -}}
{{- end -}}
{{- $ns -}}
{{- end -}}

{{/* The ServiceAccount's name: a DNS subdomain. */}}
{{- define "evictd.serviceAccount" -}}
{{- $sa := required "values: serviceAccount.name is required" .Values.serviceAccount.name -}}
{{- if or (gt (len $sa) 253) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" $sa)) -}}
{{- fail (printf "values: serviceAccount.name %q is not a DNS subdomain" $sa) -}}
{{- end -}}
{{- $sa -}}
{{- end -}}

{{/* The address evictd serves its metrics and probes on. */}}
{{- define "evictd.metricsAddress" -}}
{{- $port := int .Values.metrics.port -}}
{{- if or (lt $port 1) (gt $port 65535) -}}
{{- fail (printf "values: metrics.port %v is not a port number" .Values.metrics.port) -}}
{{- end -}}
{{- if contains ":" .Values.metrics.host -}}
{{- printf "[%s]:%d" .Values.metrics.host $port -}}
{{- else -}}
{{- printf "%s:%d" (required "values: metrics.host is required" .Values.metrics.host) $port -}}
{{- end -}}
{{- end -}}

{{/* The address of the probes' own listener: loopback, on a port of its own. */}}
{{- define "evictd.healthAddress" -}}
{{- $port := int .Values.health.port -}}
{{- if or (lt $port 1) (gt $port 65535) -}}
{{- fail (printf "values: health.port %v is not a port number" .Values.health.port) -}}
{{- end -}}
{{- if eq $port (int .Values.metrics.port) -}}
{{- fail (printf "values: health.port %d is metrics.port: the probes need a port of their own" $port) -}}
{{- end -}}
{{- printf "127.0.0.1:%d" $port -}}
{{- end -}}

{{/* Whether anything outside the node scrapes evictd. */}}
{{- define "evictd.scraped" -}}
{{- if or .Values.monitoring.service .Values.monitoring.serviceMonitor .Values.monitoring.podMonitor -}}
{{- if or (hasPrefix "127." .Values.metrics.host) (eq .Values.metrics.host "::1" "localhost") -}}
{{- fail "values: monitoring.service, serviceMonitor and podMonitor need metrics.host reachable from Prometheus (e.g. 0.0.0.0), not loopback" -}}
{{- end -}}
true
{{- end -}}
{{- end -}}

{{/* The hostPath volumes of values runtime.dirs, each checked. */}}
{{- define "evictd.runtimeVolumes" -}}
{{- $reserved := list "kubeconfig" "token" "proc" "proc-pressure" "cgroup" "kubelet-root" "pod-logs" -}}
{{- $seen := dict -}}
{{- range $i, $d := .Values.runtime.dirs }}
{{- if not (and $d.name $d.path) -}}
{{- fail (printf "values: runtime.dirs[%d] needs a name and a path" $i) -}}
{{- end -}}
{{- if or (has $d.name $reserved) (hasKey $seen $d.name) -}}
{{- fail (printf "values: runtime.dirs[%d]: the name %q is taken" $i $d.name) -}}
{{- end -}}
{{- $_ := set $seen $d.name true -}}
{{- if not (isAbs $d.path) -}}
{{- fail (printf "values: runtime.dirs[%d].path %q is not absolute" $i $d.path) -}}
{{- end -}}
{{- if not (has ($d.type | default "") (list "" "Directory" "DirectoryOrCreate")) -}}
{{- fail (printf "values: runtime.dirs[%d].type %q is neither Directory nor DirectoryOrCreate" $i $d.type) -}}
{{- end }}
- name: {{ $d.name }}
  hostPath:
    path: {{ $d.path }}
    {{- with $d.type }}
    type: {{ . }}
    {{- end }}
{{- end }}
{{- end -}}

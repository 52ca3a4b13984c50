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
{{- $reserved := list "config" "token" "proc" "proc-pressure" "cgroup" "kubelet-root" "pod-logs" -}}
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

{{/* evictd's configuration file, /etc/evictd/config.yaml: the values'
config over the chart's defaults (logFormat json), with the settings the
chart derives from its other values (paths, addresses, the kubeconfig),
which config may not set. The node's name and the Lease's namespace come
from the pod, in args: the kubelet expands $(VAR) there, not in a file. */}}
{{- define "evictd.config" -}}
{{- $derived := dict
  "kubeconfig" "/etc/evictd/kubeconfig"
  "kubeconfigInCluster" (eq .Values.apiServerInCluster true)
  "procRoot" "/host/proc"
  "cgroupMount" "/host/sys/fs/cgroup"
  "rootDir" (required "values: kubeletRootDir is required" .Values.kubeletRootDir)
  "podLogsDir" (required "values: podLogsDir is required" .Values.podLogsDir)
  "containerRuntimeEndpoint" (required "values: runtime.endpoint is required" .Values.runtime.endpoint)
  "metricsBindAddress" (include "evictd.metricsAddress" .)
  "healthzBindAddress" (include "evictd.healthAddress" .)
  "hardEvictionDirectSignal" (eq .Values.directSignal true)
-}}
{{- $from := dict
  "kubeconfig" "apiServer" "kubeconfigInCluster" "apiServerInCluster"
  "procRoot" "nothing: the chart mounts the host's /proc there" "cgroupMount" "nothing: the chart mounts the host's cgroups there"
  "rootDir" "kubeletRootDir" "podLogsDir" "podLogsDir" "containerRuntimeEndpoint" "runtime.endpoint"
  "metricsBindAddress" "metrics.host and metrics.port" "healthzBindAddress" "health.port"
  "hardEvictionDirectSignal" "directSignal" "stateDir" "stateDir" "flightRecords" "stateDir"
  "hostnameOverride" "nothing: the pod's node name" "leaseNamespace" "namespace"
  "apiVersion" "nothing" "kind" "nothing"
-}}
{{- if .Values.stateDir -}}
{{- $_ := set $derived "stateDir" .Values.stateDir -}}
{{- else -}}
{{- $_ := set $derived "flightRecords" 0 -}}
{{- end -}}
{{- $config := .Values.config | default dict -}}
{{- if not (kindIs "map" $config) -}}
{{- fail "values: config must be a mapping of evictd's settings (docs/CONFIGURATION.md)" -}}
{{- end -}}
{{- range $k, $v := $config -}}
{{- if or (hasKey $derived $k) (has $k (list "hostnameOverride" "leaseNamespace" "apiVersion" "kind")) -}}
{{- fail (printf "values: config.%s is the chart's: set %s instead" $k (get $from $k)) -}}
{{- end -}}
{{- end -}}
apiVersion: config.evictd.io/v1alpha1
kind: AgentConfiguration
{{ mergeOverwrite (dict "logFormat" "json") (deepCopy $config) $derived | toYaml }}
{{- end -}}

package config

import (
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// complete parses args as evictd's command line on a machine named
// Node-1.Example.COM and completes the configuration.
func complete(args ...string) (*Config, error) {
	fs, o := NewFlagSet("evictd")
	o.hostname = func() (string, error) { return "Node-1.Example.COM", nil }
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return o.Complete(fs)
}

func TestDefaults(t *testing.T) {
	c, err := complete()
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"MaxPodGracePeriodSeconds", c.MaxPodGracePeriodSeconds, int32(0)},
		{"PressureTransitionPeriod", c.PressureTransitionPeriod, 5 * time.Minute},
		{"KernelMemcgNotification", c.KernelMemcgNotification, true},
		{"EnforceNodeAllocatable", c.EnforceNodeAllocatable, []string{"pods"}},
		{"SystemReservedMemory", c.SystemReservedMemory, int64(0)},
		{"KubeReservedMemory", c.KubeReservedMemory, int64(0)},
		{"NodeName", c.NodeName, "node-1.example.com"},
		{"RootDir", c.RootDir, "/var/lib/kubelet"},
		{"CgroupRoot", c.CgroupRoot, "/"},
		{"CgroupDriver", c.CgroupDriver, "cgroupfs"},
		{"ContainerRuntimeEndpoint", c.ContainerRuntimeEndpoint, "unix:///run/containerd/containerd.sock"},
		{"ImageServiceEndpoint", c.ImageServiceEndpoint, "unix:///run/containerd/containerd.sock"},
		{"MinimumImageTTL", c.MinimumImageTTL, 2 * time.Minute},
		{"Kubeconfig", c.Kubeconfig, ""},
		{"NodeStatusUpdateFrequency", c.NodeStatusUpdateFrequency, 10 * time.Second},
		{"HousekeepingInterval", c.HousekeepingInterval, 10 * time.Second},
		{"DryRun", c.DryRun, false},
		{"MetricsBindAddress", c.MetricsBindAddress, "127.0.0.1:9847"},
		{"HealthzBindAddress", c.HealthzBindAddress, ""},
		{"ImageFSPath", c.ImageFSPath, ""},
		{"ProcRoot", c.ProcRoot, "/proc"},
		{"CgroupMount", c.CgroupMount, "/sys/fs/cgroup"},
		{"LogLevel", c.LogLevel, slog.LevelInfo},
		{"LogFormat", c.LogFormat, "text"},
		{"Settings.Hard", c.Settings.Hard == nil, true},
		{"Settings.MergeDefaults", c.Settings.MergeDefaults, false},
		{"Sources", len(c.Sources), 0},
		{"Notes", c.Notes, []string(nil)},
		{"thresholds", len(c.Thresholds), 6}, // five defaults + allocatableMemory.available
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s: got %#v, want %#v", ch.name, ch.got, ch.want)
		}
	}
}

// TestFlagSyntax gives every flag accepted and rejected values. A rejected
// value fails either when the flag is parsed or when Complete validates it;
// both errors name the flag and the value.
func TestFlagSyntax(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		got     func(*Config) any
		want    any
		wantErr string // the whole error text
	}{
		{"eviction-hard", []string{"--eviction-hard=memory.available<1Gi,nodefs.available<10%"},
			func(c *Config) any { return c.Settings.Hard }, map[string]string{"memory.available": "1Gi", "nodefs.available": "10%"}, ""},
		{"eviction-hard repeated adds", []string{"--eviction-hard=memory.available<1Gi", "--eviction-hard", "nodefs.available<10%"},
			func(c *Config) any { return c.Settings.Hard }, map[string]string{"memory.available": "1Gi", "nodefs.available": "10%"}, ""},
		{"eviction-hard empty", []string{"--eviction-hard="},
			func(c *Config) any { return len(c.Thresholds) }, 0, ""},
		{"eviction-hard with =", []string{"--eviction-hard=memory.available=1Gi"}, nil, nil,
			`invalid argument "memory.available=1Gi" for "--eviction-hard" flag: malformed pair "memory.available=1Gi": want signal<quantity ("<" is the only separator)`},
		{"eviction-hard bad quantity", []string{"--eviction-hard=memory.available<1Gb"}, nil, nil,
			"--eviction-hard: memory.available<1Gb: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"},
		{"eviction-hard unknown signal", []string{"--eviction-hard=memory.free<1Gi"}, nil, nil,
			"--eviction-hard: unsupported eviction signal memory.free"},
		{"eviction-soft", []string{"--eviction-soft=memory.available<1.5Gi", "--eviction-soft-grace-period=memory.available=1m30s"},
			func(c *Config) any { return c.Settings.Soft }, map[string]string{"memory.available": "1.5Gi"}, ""},
		{"eviction-soft without grace", []string{"--eviction-soft=memory.available<1.5Gi"}, nil, nil,
			"--eviction-soft: grace period must be specified for the soft eviction threshold memory.available"},
		{"eviction-soft malformed", []string{"--eviction-soft=memory.available"}, nil, nil,
			`invalid argument "memory.available" for "--eviction-soft" flag: malformed pair "memory.available": want signal<quantity ("<" is the only separator)`},
		{"eviction-soft-grace-period", []string{"--eviction-soft-grace-period=memory.available=1m30s,nodefs.available=2m"},
			func(c *Config) any { return c.Settings.SoftGracePeriod }, map[string]string{"memory.available": "1m30s", "nodefs.available": "2m"}, ""},
		{"eviction-soft-grace-period with <", []string{"--eviction-soft-grace-period=memory.available<1m"}, nil, nil,
			`invalid argument "memory.available<1m" for "--eviction-soft-grace-period" flag: malformed pair "memory.available<1m": want signal=duration`},
		{"eviction-soft-grace-period bad duration", []string{"--eviction-soft=memory.available<1Gi", "--eviction-soft-grace-period=memory.available=90"}, nil, nil,
			`--eviction-soft-grace-period: time: missing unit in duration "90"`},
		{"eviction-minimum-reclaim", []string{"--eviction-minimum-reclaim=memory.available=0Mi,nodefs.available=500Mi"},
			func(c *Config) any { return c.Settings.MinimumReclaim }, map[string]string{"memory.available": "0Mi", "nodefs.available": "500Mi"}, ""},
		{"eviction-minimum-reclaim negative", []string{"--eviction-minimum-reclaim=memory.available=-1Mi"}, nil, nil,
			"--eviction-minimum-reclaim: negative eviction minimum reclaim specified for memory.available"},
		{"eviction-minimum-reclaim malformed", []string{"--eviction-minimum-reclaim=memory.available:1Mi"}, nil, nil,
			`invalid argument "memory.available:1Mi" for "--eviction-minimum-reclaim" flag: malformed pair "memory.available:1Mi": want signal=quantity`},
		{"eviction-max-pod-grace-period", []string{"--eviction-max-pod-grace-period=30"},
			func(c *Config) any { return c.MaxPodGracePeriodSeconds }, int32(30), ""},
		{"eviction-max-pod-grace-period negative defers", []string{"--eviction-max-pod-grace-period=-1"},
			func(c *Config) any { return c.MaxPodGracePeriodSeconds }, int32(-1), ""},
		{"eviction-max-pod-grace-period with unit", []string{"--eviction-max-pod-grace-period=30s"}, nil, nil,
			`invalid argument "30s" for "--eviction-max-pod-grace-period" flag: strconv.ParseInt: parsing "30s": invalid syntax`},
		{"eviction-pressure-transition-period", []string{"--eviction-pressure-transition-period=30s"},
			func(c *Config) any { return c.PressureTransitionPeriod }, 30 * time.Second, ""},
		{"eviction-pressure-transition-period zero", []string{"--eviction-pressure-transition-period=0s"},
			func(c *Config) any { return c.PressureTransitionPeriod }, time.Duration(0), ""},
		{"eviction-pressure-transition-period no unit", []string{"--eviction-pressure-transition-period=5"}, nil, nil,
			`invalid argument "5" for "--eviction-pressure-transition-period" flag: time: missing unit in duration "5"`},
		{"eviction-pressure-transition-period negative", []string{"--eviction-pressure-transition-period=-1m"}, nil, nil,
			`--eviction-pressure-transition-period: invalid value "-1m0s": must not be negative`},
		{"kernel-memcg-notification", []string{"--kernel-memcg-notification=false"},
			func(c *Config) any { return c.KernelMemcgNotification }, false, ""},
		{"kernel-memcg-notification bad", []string{"--kernel-memcg-notification=maybe"}, nil, nil,
			`invalid argument "maybe" for "--kernel-memcg-notification" flag: strconv.ParseBool: parsing "maybe": invalid syntax`},
		{"enforce-node-allocatable", []string{"--enforce-node-allocatable=pods,kube-reserved"},
			func(c *Config) any { return c.EnforceNodeAllocatable }, []string{"pods", "kube-reserved"}, ""},
		{"enforce-node-allocatable empty", []string{"--enforce-node-allocatable="},
			func(c *Config) any { return len(c.Thresholds) }, 5, ""}, // no allocatableMemory.available
		{"enforce-node-allocatable unknown", []string{"--enforce-node-allocatable=pods,bogus"}, nil, nil,
			`invalid configuration: option "bogus" specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are "pods", "system-reserved", "system-reserved-compressible", "kube-reserved", "kube-reserved-compressible" or "none"`},
		{"enforce-node-allocatable none with pods", []string{"--enforce-node-allocatable=none,pods"}, nil, nil,
			`invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) may not contain additional enforcements when "none" is specified`},
		{"enforce-node-allocatable duplicate", []string{"--enforce-node-allocatable=pods,pods"}, nil, nil,
			`invalid configuration: duplicated enforcements "pods" in enforceNodeAllocatable (--enforce-node-allocatable)`},
		{"enforce-node-allocatable none", []string{"--enforce-node-allocatable=none"},
			func(c *Config) any { return len(c.Thresholds) }, 5, ""},
		{"system-reserved", []string{"--system-reserved=memory=1Gi,cpu=500m,ephemeral-storage=10Gi,pid=1000"},
			func(c *Config) any { return c.SystemReservedMemory }, int64(1 << 30), ""},
		{"system-reserved decimal", []string{"--system-reserved=memory=1.5Gi"},
			func(c *Config) any { return c.SystemReservedMemory }, int64(3 << 29), ""},
		{"system-reserved bad quantity", []string{"--system-reserved=memory=lots"}, nil, nil,
			`--system-reserved: invalid value "memory=lots": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`},
		{"system-reserved negative", []string{"--system-reserved=memory=-1Gi"}, nil, nil,
			`--system-reserved: invalid value "memory=-1Gi": resource quantity for "memory" cannot be negative`},
		{"system-reserved wrapping int64", []string{"--system-reserved=memory=10E"}, nil, nil,
			`--system-reserved: invalid value "memory=10E": resource quantity for "memory" must be less than 9223372036854775807`},
		{"system-reserved exponent that never finishes parsing", []string{"--system-reserved=memory=1e2147483647"}, nil, nil,
			`--system-reserved: invalid value "memory=1e2147483647": exponent out of range (at most ±999)`},
		{"system-reserved unknown resource", []string{"--system-reserved=gpu=1"}, nil, nil,
			`--system-reserved: invalid value "gpu=1": cannot reserve "gpu" resource, want cpu, memory, ephemeral-storage or pid`},
		{"system-reserved with <", []string{"--system-reserved=memory<1Gi"}, nil, nil,
			`invalid argument "memory<1Gi" for "--system-reserved" flag: malformed pair "memory<1Gi": want resource=quantity`},
		{"kube-reserved", []string{"--kube-reserved=memory=512Mi"},
			func(c *Config) any { return c.KubeReservedMemory }, int64(512 << 20), ""},
		{"kube-reserved without memory", []string{"--kube-reserved=cpu=1"},
			func(c *Config) any { return c.KubeReservedMemory }, int64(0), ""},
		{"kube-reserved bad", []string{"--kube-reserved=memory=1Gi,cpu=x"}, nil, nil,
			`--kube-reserved: invalid value "cpu=x": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`},
		{"root-dir", []string{"--root-dir=/var/lib/origin"},
			func(c *Config) any { return c.RootDir }, "/var/lib/origin", ""},
		{"root-dir relative", []string{"--root-dir=var/lib/kubelet"}, nil, nil,
			`--root-dir: invalid value "var/lib/kubelet": must be an absolute directory path`},
		{"cgroup-root", []string{"--cgroup-root=/kube.slice"},
			func(c *Config) any { return c.CgroupRoot }, "/kube.slice", ""},
		{"cgroup-root empty means /", []string{"--cgroup-root="},
			func(c *Config) any { return c.CgroupRoot }, "/", ""},
		{"cgroup-root relative", []string{"--cgroup-root=kubepods"}, nil, nil,
			`--cgroup-root: invalid value "kubepods": must be a cgroup path starting with "/"`},
		{"cgroup-driver", []string{"--cgroup-driver=systemd"},
			func(c *Config) any { return c.CgroupDriver }, "systemd", ""},
		{"cgroup-driver unknown", []string{"--cgroup-driver=docker"}, nil, nil,
			`--cgroup-driver: invalid value "docker": must be "cgroupfs" or "systemd"`},
		{"container-runtime-endpoint", []string{"--container-runtime-endpoint=unix:///run/crio/crio.sock"},
			func(c *Config) any { return []string{c.ContainerRuntimeEndpoint, c.ImageServiceEndpoint} },
			[]string{"unix:///run/crio/crio.sock", "unix:///run/crio/crio.sock"}, ""},
		{"container-runtime-endpoint bare path", []string{"--container-runtime-endpoint=/run/crio/crio.sock"},
			func(c *Config) any { return []string{c.ContainerRuntimeEndpoint, c.Notes[0]} },
			[]string{"unix:///run/crio/crio.sock", `--container-runtime-endpoint "/run/crio/crio.sock" has no scheme: using unix:///run/crio/crio.sock.`}, ""},
		{"container-runtime-endpoint tcp", []string{"--container-runtime-endpoint=tcp://10.0.0.1:2375"}, nil, nil,
			`--container-runtime-endpoint: invalid value "tcp://10.0.0.1:2375": want a unix socket URL such as unix:///run/containerd/containerd.sock`},
		{"container-runtime-endpoint host part", []string{"--container-runtime-endpoint=unix://run/crio.sock"}, nil, nil,
			`--container-runtime-endpoint: invalid value "unix://run/crio.sock": want a unix socket URL such as unix:///run/containerd/containerd.sock`},
		{"image-service-endpoint", []string{"--image-service-endpoint=unix:///run/img.sock"},
			func(c *Config) any { return c.ImageServiceEndpoint }, "unix:///run/img.sock", ""},
		{"image-service-endpoint bad", []string{"--image-service-endpoint=npipe:////./pipe/x"}, nil, nil,
			`--image-service-endpoint: invalid value "npipe:////./pipe/x": want a unix socket URL such as unix:///run/containerd/containerd.sock`},
		{"minimum-image-ttl-duration", []string{"--minimum-image-ttl-duration=1h"},
			func(c *Config) any { return c.MinimumImageTTL }, time.Hour, ""},
		{"minimum-image-ttl-duration negative", []string{"--minimum-image-ttl-duration=-2m"}, nil, nil,
			`--minimum-image-ttl-duration: invalid value "-2m0s": must not be negative`},
		{"kubeconfig", []string{"--kubeconfig=/etc/evictd/kubeconfig"},
			func(c *Config) any { return c.Kubeconfig }, "/etc/evictd/kubeconfig", ""},
		{"hostname-override lowercased", []string{"--hostname-override= Worker-1.Example.com "},
			func(c *Config) any { return c.NodeName }, "worker-1.example.com", ""},
		{"hostname-override invalid", []string{"--hostname-override=worker_1"}, nil, nil,
			`--hostname-override: invalid node name "worker_1": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{"node-status-update-frequency", []string{"--node-status-update-frequency=1m"},
			func(c *Config) any { return c.NodeStatusUpdateFrequency }, time.Minute, ""},
		{"node-status-update-frequency zero", []string{"--node-status-update-frequency=0s"}, nil, nil,
			`--node-status-update-frequency: invalid value "0s": must be positive`},
		{"merge-default-eviction-settings", []string{"--merge-default-eviction-settings", "--eviction-hard=memory.available<1Gi"},
			func(c *Config) any { return len(c.Thresholds) }, 6, ""},
		{"housekeeping-interval", []string{"--housekeeping-interval=2s"},
			func(c *Config) any { return c.HousekeepingInterval }, 2 * time.Second, ""},
		{"housekeeping-interval zero", []string{"--housekeeping-interval=0s"}, nil, nil,
			`--housekeeping-interval: invalid value "0s": must be positive`},
		{"housekeeping-interval negative", []string{"--housekeeping-interval=-10s"}, nil, nil,
			`--housekeeping-interval: invalid value "-10s": must not be negative`},
		{"dry-run", []string{"--dry-run"}, func(c *Config) any { return c.DryRun }, true, ""},
		{"metrics-bind-address all interfaces", []string{"--metrics-bind-address=:9847"},
			func(c *Config) any { return c.MetricsBindAddress }, ":9847", ""},
		{"metrics-bind-address ipv6", []string{"--metrics-bind-address=[::1]:9847"},
			func(c *Config) any { return c.MetricsBindAddress }, "[::1]:9847", ""},
		{"metrics-bind-address no port", []string{"--metrics-bind-address=localhost"}, nil, nil,
			`--metrics-bind-address: invalid value "localhost": want host:port: address localhost: missing port in address`},
		{"metrics-bind-address named port", []string{"--metrics-bind-address=127.0.0.1:http"}, nil, nil,
			`--metrics-bind-address: invalid value "127.0.0.1:http": port "http" is not a number from 0 to 65535`},
		{"metrics-bind-address port too big", []string{"--metrics-bind-address=127.0.0.1:70000"}, nil, nil,
			`--metrics-bind-address: invalid value "127.0.0.1:70000": port "70000" is not a number from 0 to 65535`},
		{"healthz-bind-address", []string{"--healthz-bind-address=127.0.0.1:9848"},
			func(c *Config) any { return c.HealthzBindAddress }, "127.0.0.1:9848", ""},
		{"healthz-bind-address port 0 beside metrics port 0", []string{"--metrics-bind-address=127.0.0.1:0", "--healthz-bind-address=127.0.0.1:0"},
			func(c *Config) any { return c.HealthzBindAddress }, "127.0.0.1:0", ""},
		{"healthz-bind-address no port", []string{"--healthz-bind-address=127.0.0.1"}, nil, nil,
			`--healthz-bind-address: invalid value "127.0.0.1": want host:port: address 127.0.0.1: missing port in address`},
		{"healthz-bind-address port too big", []string{"--healthz-bind-address=127.0.0.1:98480"}, nil, nil,
			`--healthz-bind-address: invalid value "127.0.0.1:98480": port "98480" is not a number from 0 to 65535`},
		{"healthz-bind-address the metrics port", []string{"--healthz-bind-address=[::1]:9847"}, nil, nil,
			`--healthz-bind-address: invalid value "[::1]:9847": port 9847 is --metrics-bind-address's: the probes need a port of their own`},
		{"trusted-daemonset-namespaces default", nil,
			func(c *Config) any { return c.TrustedDaemonSetNamespaces }, []string{"kube-system"}, ""},
		{"trusted-daemonset-namespaces", []string{"--trusted-daemonset-namespaces=kube-system,monitoring"},
			func(c *Config) any { return c.TrustedDaemonSetNamespaces }, []string{"kube-system", "monitoring"}, ""},
		{"trusted-daemonset-namespaces none", []string{"--trusted-daemonset-namespaces="},
			func(c *Config) any { return c.TrustedDaemonSetNamespaces }, []string{}, ""},
		{"trusted-daemonset-namespaces bad", []string{"--trusted-daemonset-namespaces=kube-system,Team_A"}, nil, nil,
			`--trusted-daemonset-namespaces: invalid value "Team_A": not a namespace name: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		{"imagefs-path", []string{"--imagefs-path=/var/lib/containers"},
			func(c *Config) any { return c.ImageFSPath }, "/var/lib/containers", ""},
		{"imagefs-path relative", []string{"--imagefs-path=containers"}, nil, nil,
			`--imagefs-path: invalid value "containers": must be an absolute directory path`},
		{"proc-root", []string{"--proc-root=/host/proc"}, func(c *Config) any { return c.ProcRoot }, "/host/proc", ""},
		{"proc-root empty", []string{"--proc-root="}, nil, nil,
			`--proc-root: invalid value "": must be an absolute directory path`},
		{"cgroup-mount", []string{"--cgroup-mount=/host/sys/fs/cgroup"},
			func(c *Config) any { return c.CgroupMount }, "/host/sys/fs/cgroup", ""},
		{"log-level", []string{"--log-level=debug"}, func(c *Config) any { return c.LogLevel }, slog.LevelDebug, ""},
		{"log-level upper case", []string{"--log-level=WARN"}, func(c *Config) any { return c.LogLevel }, slog.LevelWarn, ""},
		{"log-level unknown", []string{"--log-level=verbose"}, nil, nil,
			`--log-level: invalid value "verbose": want debug, info, warn or error`},
		{"log-format", []string{"--log-format=json"}, func(c *Config) any { return c.LogFormat }, "json", ""},
		{"log-format upper case", []string{"--log-format=JSON"}, func(c *Config) any { return c.LogFormat }, "json", ""},
		{"log-format unknown", []string{"--log-format=logfmt"}, nil, nil,
			`--log-format: invalid value "logfmt": want text or json`},
		{"pressure-taint-effect default", nil, func(c *Config) any { return c.TaintEffect }, "NoSchedule", ""},
		{"pressure-taint-effect", []string{"--pressure-taint-effect=PreferNoSchedule"}, func(c *Config) any { return c.TaintEffect }, "PreferNoSchedule", ""},
		{"pressure-taint-effect unknown", []string{"--pressure-taint-effect=NoEntry"}, nil, nil,
			`--pressure-taint-effect: invalid value "NoEntry": want NoSchedule, PreferNoSchedule or NoExecute`},
		{"runtime-request-timeout", []string{"--runtime-request-timeout=3s"}, func(c *Config) any { return c.RuntimeRequestTimeout }, 3 * time.Second, ""},
		{"runtime-request-timeout zero", []string{"--runtime-request-timeout=0s"}, nil, nil,
			`--runtime-request-timeout: invalid value "0s": must be positive`},
		{"pod-logs-dir relative", []string{"--pod-logs-dir=logs"}, nil, nil,
			`--pod-logs-dir: invalid value "logs": must be an absolute directory path`},
		{"volume-stats-agg-period", []string{"--volume-stats-agg-period=1m"}, func(c *Config) any { return c.VolumeStatsAggPeriod }, time.Minute, ""},
		{"fast-poll-interval default", nil, func(c *Config) any { return c.FastPollInterval }, 250 * time.Millisecond, ""},
		{"fast-poll-interval", []string{"--fast-poll-interval=100ms"}, func(c *Config) any { return c.FastPollInterval }, 100 * time.Millisecond, ""},
		{"fast-poll-interval zero disables", []string{"--fast-poll-interval=0"}, func(c *Config) any { return c.FastPollInterval }, time.Duration(0), ""},
		{"fast-poll-interval negative", []string{"--fast-poll-interval=-1s"}, nil, nil,
			`--fast-poll-interval: invalid value "-1s": must not be negative`},
		{"eviction-time-to-exhaustion default", nil, func(c *Config) any { return c.TimeToExhaustion }, false, ""},
		{"eviction-time-to-exhaustion", []string{"--eviction-time-to-exhaustion"}, func(c *Config) any { return c.TimeToExhaustion }, true, ""},
		{"eviction-time-to-exhaustion-margin", []string{"--eviction-time-to-exhaustion-margin=250ms"}, func(c *Config) any { return c.TimeToExhaustionMargin }, 250 * time.Millisecond, ""},
		{"eviction-time-to-exhaustion without a hard memory threshold", []string{"--eviction-time-to-exhaustion", "--eviction-hard=nodefs.available<10%"}, func(c *Config) any { return c.Notes[len(c.Notes)-1] },
			"--eviction-time-to-exhaustion has no effect: no hard memory.available or allocatableMemory.available threshold to act on early.", ""},
		{"impersonate-node default", nil, func(c *Config) any { return c.ImpersonateNode }, true, ""},
		{"impersonate-node off", []string{"--impersonate-node=false"}, func(c *Config) any { return c.ImpersonateNode }, false, ""},
		{"impersonate-node garbled", []string{"--impersonate-node=maybe"}, nil, nil,
			`invalid argument "maybe" for "--impersonate-node" flag: strconv.ParseBool: parsing "maybe": invalid syntax`},
		{"token-renewal default", nil, func(c *Config) any { return c.TokenRenewal }, true, ""},
		{"token-renewal off", []string{"--token-renewal=false"}, func(c *Config) any { return c.TokenRenewal }, false, ""},
		{"token-renew-before default", nil, func(c *Config) any { return c.TokenRenewBefore }, time.Duration(0), ""},
		{"token-renew-before", []string{"--token-renew-before=9m55s"}, func(c *Config) any { return c.TokenRenewBefore }, 9*time.Minute + 55*time.Second, ""},
		{"token-renew-before negative", []string{"--token-renew-before=-1h"}, nil, nil,
			`--token-renew-before: invalid value "-1h0m0s": must not be negative`},
		{"token-lifetime default", nil, func(c *Config) any { return c.TokenLifetime }, time.Duration(0), ""},
		{"token-lifetime", []string{"--token-lifetime=24h"}, func(c *Config) any { return c.TokenLifetime }, 24 * time.Hour, ""},
		{"token-lifetime below the API server's minimum", []string{"--token-lifetime=5m"}, nil, nil,
			`--token-lifetime: invalid value "5m0s": must be 0 (the current token's own lifetime) or from 10m0s to 720h0m0s`},
		{"token-lifetime above the policy's maximum", []string{"--token-lifetime=721h"}, nil, nil,
			`--token-lifetime: invalid value "721h0m0s": must be 0 (the current token's own lifetime) or from 10m0s to 720h0m0s`},
		{"token-renew-before not below token-lifetime", []string{"--token-lifetime=1h", "--token-renew-before=1h"}, nil, nil,
			`--token-renew-before: invalid value "1h0m0s": must be below --token-lifetime (1h0m0s), or each token would be renewed as soon as it is written`},
		{"hard-eviction-stop-wait default", nil, func(c *Config) any { return c.HardEvictionStopWait }, time.Second, ""},
		{"hard-eviction-stop-wait", []string{"--hard-eviction-stop-wait=250ms"}, func(c *Config) any { return c.HardEvictionStopWait }, 250 * time.Millisecond, ""},
		{"hard-eviction-stop-wait zero", []string{"--hard-eviction-stop-wait=0"}, nil, nil,
			`--hard-eviction-stop-wait: invalid value "0s": must be positive`},
		{"hard-eviction-stop-wait negative", []string{"--hard-eviction-stop-wait=-1s"}, nil, nil,
			`--hard-eviction-stop-wait: invalid value "-1s": must not be negative`},
		{"local-kill-after default", nil, func(c *Config) any { return c.LocalKillAfter }, 5 * time.Second, ""},
		{"local-kill-after", []string{"--local-kill-after=2s"}, func(c *Config) any { return c.LocalKillAfter }, 2 * time.Second, ""},
		{"local-kill-after zero disables", []string{"--local-kill-after=0"}, func(c *Config) any { return c.LocalKillAfter }, time.Duration(0), ""},
		{"local-kill-after negative", []string{"--local-kill-after=-1s"}, nil, nil,
			`--local-kill-after: invalid value "-1s": must not be negative`},
		{"fast-poll-margin default", nil, func(c *Config) any { return c.FastPollMargin.Percentage }, float32(0.1), ""},
		{"fast-poll-margin percentage", []string{"--fast-poll-margin=25%"}, func(c *Config) any { return c.FastPollMargin.Percentage }, float32(0.25), ""},
		{"fast-poll-margin quantity", []string{"--fast-poll-margin=2Gi"}, func(c *Config) any { return c.FastPollMargin.Quantity.Value() }, int64(2 << 30), ""},
		{"fast-poll-margin over 100%", []string{"--fast-poll-margin=150%"}, nil, nil,
			`--fast-poll-margin: invalid value "150%": want a percentage of capacity from 0% to 100%`},
		{"fast-poll-margin negative", []string{"--fast-poll-margin=-1Gi"}, nil, nil,
			`--fast-poll-margin: invalid value "-1Gi": must not be negative`},
		{"fast-poll-margin garbled", []string{"--fast-poll-margin=lots"}, nil, nil,
			`--fast-poll-margin: invalid value "lots": want a quantity such as 2Gi or a percentage of capacity such as 10%`},
		{"unknown flag", []string{"--eviction-hardd=memory.available<1Gi"}, nil, nil,
			"unknown flag: --eviction-hardd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := complete(tt.args...)
			if errText(err) != tt.wantErr {
				t.Fatalf("got error %q, want %q", errText(err), tt.wantErr)
			}
			if err != nil {
				return
			}
			if got := tt.got(c); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestSeveralErrorsAtOnce(t *testing.T) {
	_, err := complete("--housekeeping-interval=0s", "--cgroup-driver=docker", "--log-level=loud")
	want := `--cgroup-driver: invalid value "docker": must be "cgroupfs" or "systemd"` + "\n" +
		`--housekeeping-interval: invalid value "0s": must be positive` + "\n" +
		`--log-level: invalid value "loud": want debug, info, warn or error`
	// Durations are checked first; compare as sets of lines.
	if got := sortedLines(errText(err)); got != sortedLines(want) {
		t.Errorf("got %q, want %q", errText(err), want)
	}
}

func TestHostnameFailure(t *testing.T) {
	fs, o := NewFlagSet("evictd")
	o.hostname = func() (string, error) { return "", errTest }
	_, err := o.Complete(fs)
	if got, want := errText(err), "read hostname (set --hostname-override): test error"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	o.hostnameOverride = "worker-2"
	c, err := o.Complete(fs)
	if err != nil || c.NodeName != "worker-2" {
		t.Errorf("with an override: got %v, %v, want worker-2, nil", c, err)
	}
}

func TestHelpDocumentsDefaults(t *testing.T) {
	fs, _ := NewFlagSet("evictd")
	fs.VisitAll(func(f *pflag.Flag) {
		one := pflag.NewFlagSet("one", pflag.ContinueOnError)
		one.AddFlag(f)
		if usage := one.FlagUsages(); !strings.Contains(usage, "default") {
			t.Errorf("--%s: usage %q does not state the default", f.Name, usage)
		}
	})
	var n int
	fs.VisitAll(func(*pflag.Flag) { n++ })
	if n != 70 {
		t.Errorf("got %d flags, want 70", n)
	}
}

func TestNilInputs(t *testing.T) {
	var o *Options
	if _, err := o.Complete(nil); err == nil {
		t.Error("nil Options: got no error, want one")
	}
	_, o = NewFlagSet("evictd")
	o.hostname = func() (string, error) { return "n1", nil }
	c, err := o.Complete(nil)
	if err != nil || c.NodeName != "n1" {
		t.Errorf("nil FlagSet: got %v, %v, want the defaults", c, err)
	}
	if err := FormatThresholds(&strings.Builder{}, nil); err == nil {
		t.Error("FormatThresholds(nil): got no error, want one")
	}
}

package config

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/thresholds"
)

func TestKubeletConfigGood(t *testing.T) {
	const f = "testdata/kubelet-good.yaml"
	c, err := complete("--config=" + f)
	if err != nil {
		t.Fatal(err)
	}
	cpu, eph := c.SystemReserved["cpu"], c.KubeReserved["ephemeral-storage"]
	checks := []struct {
		name      string
		got, want any
	}{
		{"Settings.Hard", c.Settings.Hard, map[string]string{"memory.available": "500Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%"}},
		{"Settings.HardSource", c.Settings.HardSource, "evictionHard in " + f},
		{"Settings.Soft", c.Settings.Soft, map[string]string{"memory.available": "1Gi", "nodefs.available": "15%"}},
		{"Settings.SoftSource", c.Settings.SoftSource, "evictionSoft in " + f},
		{"Settings.SoftGracePeriod", c.Settings.SoftGracePeriod, map[string]string{"memory.available": "1m30s", "nodefs.available": "2m"}},
		{"Settings.SoftGracePeriodSource", c.Settings.SoftGracePeriodSource, "evictionSoftGracePeriod in " + f},
		{"Settings.MinimumReclaim", c.Settings.MinimumReclaim, map[string]string{"memory.available": "200Mi"}},
		{"Settings.MinimumReclaimSource", c.Settings.MinimumReclaimSource, "evictionMinimumReclaim in " + f},
		{"Settings.EnforceNodeAllocatable", c.Settings.EnforceNodeAllocatable, []string{"pods", "kube-reserved"}},
		{"MaxPodGracePeriodSeconds", c.MaxPodGracePeriodSeconds, int32(60)},
		{"PressureTransitionPeriod", c.PressureTransitionPeriod, 3 * time.Minute},
		{"KernelMemcgNotification", c.KernelMemcgNotification, false},
		{"SystemReservedMemory", c.SystemReservedMemory, int64(1 << 30)},
		{"SystemReserved cpu", cpu.MilliValue(), int64(500)},
		{"KubeReservedMemory", c.KubeReservedMemory, int64(512 << 20)},
		{"KubeReserved ephemeral-storage", eph.Value(), int64(1 << 30)},
		{"CgroupRoot", c.CgroupRoot, "/"},
		{"CgroupDriver", c.CgroupDriver, "systemd"},
		{"ContainerRuntimeEndpoint", c.ContainerRuntimeEndpoint, "unix:///run/crio/crio.sock"},
		{"ImageServiceEndpoint", c.ImageServiceEndpoint, "unix:///run/crio/crio-image.sock"},
		{"MinimumImageTTL", c.MinimumImageTTL, 5 * time.Minute},
		{"NodeStatusUpdateFrequency", c.NodeStatusUpdateFrequency, 20 * time.Second},
		{"ConfigFile", c.ConfigFile, f},
		{"Sources[kernel-memcg-notification]", c.Sources["kernel-memcg-notification"], "kernelMemcgNotification in " + f},
		{"Sources[minimum-image-ttl-duration]", c.Sources["minimum-image-ttl-duration"], "imageMinimumGCAge in " + f},
		{"Sources[root-dir]", c.Sources["root-dir"], ""},
		{"Notes", c.Notes, []string{"--kubelet-config is not given: evictd checks the --config file " + f + " as the kubelet's configuration.",
			"evictionHard in " + f + " replaces the default hard thresholds, so imagefs.inodesFree<5% no longer apply (as in the kubelet); list them, or set mergeDefaultEvictionSettings, to keep them"}},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s: got %#v, want %#v", ch.name, ch.got, ch.want)
		}
	}
	var got []string
	for _, th := range c.Thresholds {
		got = append(got, th.Describe())
	}
	want := []string{
		"memory.available<500Mi hard minReclaim=200Mi (evictionHard in " + f + ")",
		"memory.available<1Gi soft grace=1m30s minReclaim=200Mi (evictionSoft in " + f + ")",
		"allocatableMemory.available<500Mi hard minReclaim=200Mi (derived from memory.available (enforce-node-allocatable=pods))",
		"nodefs.available<10% hard (evictionHard in " + f + ")",
		"nodefs.available<15% soft grace=2m0s (evictionSoft in " + f + ")",
		"nodefs.inodesFree<5% hard (evictionHard in " + f + ")",
		"imagefs.available<15% hard (evictionHard in " + f + ")",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("thresholds:\ngot  %q\nwant %q", got, want)
	}
}

func TestKubeletConfigErrors(t *testing.T) {
	tests := []struct{ file, wantErr string }{
		{"kubelet-not-yaml.yaml", `KubeletConfiguration testdata/kubelet-not-yaml.yaml: yaml: line 3: did not find expected ',' or ']'`},
		{"kubelet-wrong-kind.yaml", `KubeletConfiguration testdata/kubelet-wrong-kind.yaml: apiVersion "kubeproxy.config.k8s.io/v1alpha1", kind "KubeProxyConfiguration": want apiVersion "kubelet.config.k8s.io/v1beta1", kind "KubeletConfiguration"`},
		{"kubelet-wrong-apiversion.yaml", `KubeletConfiguration testdata/kubelet-wrong-apiversion.yaml: apiVersion "kubelet.config.k8s.io/v1", kind "KubeletConfiguration": want apiVersion "kubelet.config.k8s.io/v1beta1", kind "KubeletConfiguration"`},
		{"kubelet-bad-duration.yaml", `KubeletConfiguration testdata/kubelet-bad-duration.yaml: evictionPressureTransitionPeriod: invalid value "5x": time: unknown unit "x" in duration "5x"`},
		{"kubelet-bad-type.yaml", `KubeletConfiguration testdata/kubelet-bad-type.yaml: evictionMaxPodGracePeriod: invalid value "thirty": json: cannot unmarshal string into Go struct field KubeletConfiguration.evictionMaxPodGracePeriod of type int32`},
		{"kubelet-negative-frequency.yaml", `nodeStatusUpdateFrequency in testdata/kubelet-negative-frequency.yaml: invalid value "-10s": must not be negative`},
		{"kubelet-bad-driver.yaml", `cgroupDriver in testdata/kubelet-bad-driver.yaml: invalid value "docker": must be "cgroupfs" or "systemd"`},
		{"kubelet-bad-reserved.yaml", `systemReserved in testdata/kubelet-bad-reserved.yaml: invalid value "memory=lots": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`},
		{"kubelet-bad-threshold.yaml", `evictionHard in testdata/kubelet-bad-threshold.yaml: eviction threshold memory.available must be positive: -1Gi`},
		{"kubelet-bad-enforce.yaml", `enforceNodeAllocatable in testdata/kubelet-bad-enforce.yaml: invalid configuration: option "memory" specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are "pods", "system-reserved", "system-reserved-compressible", "kube-reserved", "kube-reserved-compressible" or "none"`},
		{"kubelet-huge-threshold.yaml", `evictionHard in testdata/kubelet-huge-threshold.yaml: eviction threshold memory.available must be less than 9223372036854775807: 100000000000000000000000`},
		{"kubelet-empty.yaml", `KubeletConfiguration testdata/kubelet-empty.yaml: not a YAML mapping with apiVersion kubelet.config.k8s.io/v1beta1 and kind KubeletConfiguration`},
		{"kubelet-not-mapping.yaml", `KubeletConfiguration testdata/kubelet-not-mapping.yaml: not a YAML mapping with apiVersion kubelet.config.k8s.io/v1beta1 and kind KubeletConfiguration`},
		{"no-such-file.yaml", `read --import-kubelet-config file: open testdata/no-such-file.yaml: no such file or directory`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			_, err := complete("--import-kubelet-config=testdata/" + tt.file)
			if got := errText(err); got != tt.wantErr {
				t.Errorf("got error %q, want %q", got, tt.wantErr)
			}
		})
	}
}

// TestKubeletConfigLenient: a file that strict decoding refuses for
// unknown or duplicate fields only is decoded leniently, as the kubelet
// decodes its own, with a warning naming the fields; its other settings
// are taken as written.
func TestKubeletConfigLenient(t *testing.T) {
	for _, tt := range []struct {
		file        string
		wantWarning string
		wantFields  map[string]int
		wantHard    map[string]string
		wantPTP     time.Duration
	}{
		{"kubelet-future-field.yaml",
			`ignored unknown field(s) "authentication.x509.reloadInterval", "someFieldFromKubelet138" (from a newer kubelet, or misspelt: a misspelt setting keeps its default).`,
			map[string]int{WarnUnknownField: 2, WarnDuplicateField: 0}, map[string]string{"memory.available": "500Mi"}, 5 * time.Minute},
		{"kubelet-unknown-key.yaml", `ignored unknown field(s) "evictionHardd"`,
			map[string]int{WarnUnknownField: 1, WarnDuplicateField: 0}, nil, 5 * time.Minute},
		{"kubelet-nested-unknown-key.yaml", `ignored unknown field(s) "authentication.x509.clientCAFil"`,
			map[string]int{WarnUnknownField: 1, WarnDuplicateField: 0}, nil, 5 * time.Minute},
		// Keys are case-sensitive, as for the kubelet: EvictionHard is not
		// evictionHard, so the default thresholds stay.
		{"kubelet-wrong-case.yaml", `ignored unknown field(s) "EvictionHard"`,
			map[string]int{WarnUnknownField: 1, WarnDuplicateField: 0}, nil, 5 * time.Minute},
		{"kubelet-duplicate-key.yaml", `took the last of duplicate field(s) "evictionPressureTransitionPeriod".`,
			map[string]int{WarnUnknownField: 0, WarnDuplicateField: 1}, nil, 2 * time.Minute},
	} {
		t.Run(tt.file, func(t *testing.T) {
			f := "testdata/" + tt.file
			c, err := complete("--config=" + f)
			if err != nil {
				t.Fatalf("got error %v, want lenient decoding", err)
			}
			if len(c.Lenient) != 1 {
				t.Fatalf("got lenient decodings %+v, want one", c.Lenient)
			}
			l := c.Lenient[0]
			wantStart := "KubeletConfiguration " + f + " (--config) is not valid strictly, so evictd decoded it leniently, as the kubelet does: "
			if !strings.HasPrefix(l.Warning, wantStart) || !strings.Contains(l.Warning, tt.wantWarning) {
				t.Errorf("warning:\ngot  %q\nwant %q followed by %q", l.Warning, wantStart, tt.wantWarning)
			}
			if l.Path != f || l.Flag != "--config" || !reflect.DeepEqual(l.Fields, tt.wantFields) {
				t.Errorf("got %s %s %v, want %s --config %v", l.Flag, l.Path, l.Fields, f, tt.wantFields)
			}
			if len(c.Warnings) == 0 || c.Warnings[0] != l.Warning {
				t.Errorf("warnings %q do not start with the lenient decoding's", c.Warnings)
			}
			if tt.wantHard != nil && !reflect.DeepEqual(c.Settings.Hard, tt.wantHard) {
				t.Errorf("evictionHard: got %v, want %v", c.Settings.Hard, tt.wantHard)
			}
			if c.PressureTransitionPeriod != tt.wantPTP {
				t.Errorf("evictionPressureTransitionPeriod: got %s, want %s", c.PressureTransitionPeriod, tt.wantPTP)
			}
		})
	}
	t.Run("a strict file", func(t *testing.T) {
		c, err := complete("--config=testdata/kubelet-good.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if c.Lenient != nil {
			t.Errorf("got lenient decodings %+v, want none", c.Lenient)
		}
	})
}

// TestKubeletConfigZeroValues: the kubelet's defaulting treats zero
// durations and empty strings as unset, so evictd keeps its defaults.
func TestKubeletConfigZeroValues(t *testing.T) {
	c, err := complete("--config=testdata/kubelet-zero-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := []any{c.PressureTransitionPeriod, c.NodeStatusUpdateFrequency, c.MinimumImageTTL, c.CgroupDriver, c.ContainerRuntimeEndpoint, len(c.Sources)}
	want := []any{5 * time.Minute, 10 * time.Second, 2 * time.Minute, "cgroupfs", "unix:///run/containerd/containerd.sock", 0}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// signalsOf lists "signal<value hard|soft grace" for each threshold.
func signalsOf(ths []thresholds.Threshold) []string {
	var out []string
	for _, t := range ths {
		s := t.String()
		if t.Soft {
			s += " soft " + t.GracePeriod.String()
		}
		out = append(out, s)
	}
	return out
}

func TestNodeConfigSeeds(t *testing.T) {
	tests := []struct {
		file           string
		wantThresholds []string
		wantReserved   int64
		wantSources    map[string]string
	}{
		{"node-config-hard.yaml", []string{
			"memory.available<500Mi", "allocatableMemory.available<500Mi", "nodefs.available<500Mi",
			"nodefs.inodesFree<100Mi", "imagefs.available<100Mi", "imagefs.inodesFree<100Mi",
		}, 0, map[string]string{"eviction-hard": "kubeletArguments.eviction-hard in testdata/node-config-hard.yaml", "node-config": "--node-config"}},
		{"node-config-soft.yaml", []string{
			"memory.available<100Mi", "memory.available<500Mi soft 1m30s", "allocatableMemory.available<100Mi",
			"nodefs.available<10%", "nodefs.available<500Mi soft 1m30s",
			"nodefs.inodesFree<5%", "nodefs.inodesFree<100Mi soft 1m30s",
			"imagefs.available<15%", "imagefs.available<100Mi soft 1m30s",
			"imagefs.inodesFree<5%", "imagefs.inodesFree<100Mi soft 1m30s",
		}, 0, map[string]string{
			"node-config":                "--node-config",
			"eviction-soft":              "kubeletArguments.eviction-soft in testdata/node-config-soft.yaml",
			"eviction-soft-grace-period": "kubeletArguments.eviction-soft-grace-period in testdata/node-config-soft.yaml",
		}},
		{"node-config-allocatable.yaml", []string{
			"memory.available<512Mi", "memory.available<1Gi soft 30s", "allocatableMemory.available<512Mi",
		}, 2 << 30, map[string]string{
			"node-config":                "--node-config",
			"eviction-hard":              "kubeletArguments.eviction-hard in testdata/node-config-allocatable.yaml",
			"eviction-soft":              "kubeletArguments.eviction-soft in testdata/node-config-allocatable.yaml",
			"eviction-soft-grace-period": "kubeletArguments.eviction-soft-grace-period in testdata/node-config-allocatable.yaml",
			"system-reserved":            "kubeletArguments.system-reserved in testdata/node-config-allocatable.yaml",
		}},
		{"node-config-reserved.yaml", []string{
			"memory.available<500Mi", "allocatableMemory.available<500Mi",
		}, 3 << 29, map[string]string{
			"node-config":     "--node-config",
			"eviction-hard":   "kubeletArguments.eviction-hard in testdata/node-config-reserved.yaml",
			"system-reserved": "kubeletArguments.system-reserved in testdata/node-config-reserved.yaml",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			c, err := complete("--node-config=testdata/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			if got := signalsOf(c.Thresholds); !reflect.DeepEqual(got, tt.wantThresholds) {
				t.Errorf("thresholds: got %q, want %q", got, tt.wantThresholds)
			}
			if c.SystemReservedMemory != tt.wantReserved {
				t.Errorf("system-reserved memory: got %d, want %d", c.SystemReservedMemory, tt.wantReserved)
			}
			if !maps.Equal(c.Sources, tt.wantSources) {
				t.Errorf("sources: got %v, want %v", c.Sources, tt.wantSources)
			}
		})
	}
}

func TestNodeConfigFull(t *testing.T) {
	const f = "testdata/node-config-full.yaml"
	c, err := complete("--node-config=" + f)
	if err != nil {
		t.Fatal(err)
	}
	got := []any{c.PressureTransitionPeriod, c.MaxPodGracePeriodSeconds, c.KernelMemcgNotification,
		c.EnforceNodeAllocatable, c.CgroupDriver, c.RootDir, c.Kubeconfig, c.NodeConfigFile}
	want := []any{5 * time.Minute, int32(30), false,
		[]string{"pods", "system-reserved"}, "systemd", "/var/lib/origin/openshift.local.volumes", "", f}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	wantNotes := []string{
		"kubeletArguments.kubeconfig in " + f + " is ignored: it is the kubelet's identity, evictd uses its own (--kubeconfig).",
		"kubeletArguments in " + f + ": ignored cloud-provider, image-gc-high-threshold, max-pods, node-labels, which are not kubelet flags evictd reads.",
		f + ` sets nodeName "node1.example.com" but evictd watches node "node-1.example.com"; set --hostname-override if the kubelet registers this node as "node1.example.com".`,
	}
	if !reflect.DeepEqual(c.Notes, wantNotes) {
		t.Errorf("notes:\ngot  %q\nwant %q", c.Notes, wantNotes)
	}
	c, err = complete("--node-config="+f, "--hostname-override=node1.example.com")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Notes {
		if strings.Contains(n, "nodeName") {
			t.Errorf("with a matching --hostname-override: got note %q, want none about nodeName", n)
		}
	}
}

func TestNodeConfigErrors(t *testing.T) {
	tests := []struct{ file, wantErr string }{
		{"node-config-bad-value.yaml", `node-config testdata/node-config-bad-value.yaml: kubeletArguments.eviction-pressure-transition-period: invalid value "5x": time: unknown unit "x" in duration "5x"`},
		{"node-config-bad-pair.yaml", `node-config testdata/node-config-bad-pair.yaml: kubeletArguments.eviction-hard: invalid value "memory.available=500Mi": malformed pair "memory.available=500Mi": want signal<quantity ("<" is the only separator)`},
		{"node-config-scalar.yaml", `node-config testdata/node-config-scalar.yaml: kubeletArguments.eviction-hard: value "memory.available<500Mi" is not a list of strings, e.g. ["5m"]`},
		{"node-config-bad-threshold.yaml", `kubeletArguments.eviction-hard in testdata/node-config-bad-threshold.yaml: memory.available<lots: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`},
		{"node-config-soft-no-grace.yaml", `kubeletArguments.eviction-soft in testdata/node-config-soft-no-grace.yaml: grace period must be specified for the soft eviction threshold memory.available`},
		{"node-config-args-list.yaml", `node-config testdata/node-config-args-list.yaml: json: cannot unmarshal array into Go struct field .kubeletArguments of type map[string]json.RawMessage`},
		{"no-such-file.yaml", `read --node-config file: open testdata/no-such-file.yaml: no such file or directory`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			_, err := complete("--node-config=testdata/" + tt.file)
			if got := errText(err); got != tt.wantErr {
				t.Errorf("got error %q, want %q", got, tt.wantErr)
			}
		})
	}
}

func TestNodeConfigLenient(t *testing.T) {
	tests := []struct {
		name, yaml string
		wantNotes  []string
		wantHard   map[string]string
	}{
		{"no kubeletArguments", "apiVersion: v1\nkind: NodeConfig\n",
			[]string{"FILE has no kubeletArguments: evictd takes nothing from it."}, nil},
		{"unused key of any shape", "kubeletArguments:\n  register-with-taints: A=true:NoSchedule\n  eviction-hard: [\"memory.available<1Gi\", \"nodefs.available<10%\", \"nodefs.inodesFree<5%\", \"imagefs.available<15%\", \"imagefs.inodesFree<5%\"]\n",
			[]string{"kubeletArguments in FILE: ignored register-with-taints, which are not kubelet flags evictd reads."},
			map[string]string{"memory.available": "1Gi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%", "imagefs.inodesFree": "5%"}},
		{"empty list disables hard thresholds", "kubeletArguments:\n  eviction-hard: []\n",
			[]string{"kubeletArguments.eviction-hard in FILE replaces the default hard thresholds, so memory.available<100Mi, nodefs.available<10%, nodefs.inodesFree<5%, imagefs.available<15%, imagefs.inodesFree<5% no longer apply (as in the kubelet); list them, or set mergeDefaultEvictionSettings, to keep them"},
			map[string]string{}},
		{"entries joined with commas", "kubeletArguments:\n  eviction-hard: [\"memory.available<1Gi,nodefs.available<10%\", \"nodefs.inodesFree<5%\", \"imagefs.available<15%\", \"imagefs.inodesFree<5%\"]\n",
			nil,
			map[string]string{"memory.available": "1Gi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%", "imagefs.inodesFree": "5%"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "node-config.yaml")
			if err := os.WriteFile(f, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := complete("--node-config=" + f)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, n := range tt.wantNotes {
				want = append(want, strings.ReplaceAll(n, "FILE", f))
			}
			if !reflect.DeepEqual(c.Notes, want) {
				t.Errorf("notes: got %q, want %q", c.Notes, want)
			}
			if !reflect.DeepEqual(c.Settings.Hard, tt.wantHard) {
				t.Errorf("hard: got %#v, want %#v", c.Settings.Hard, tt.wantHard)
			}
		})
	}
}

func TestFileErrors(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, make([]byte, maxFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tests := []struct{ arg, wantErr string }{
		{"--config=" + big, "read --config file " + big + ": larger than 4 MiB"},
		{"--node-config=" + big, "read --node-config file " + big + ": larger than 4 MiB"},
		{"--config=" + dir, "read --config file: read " + dir + ": is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.arg, func(t *testing.T) {
			_, err := complete(tt.arg)
			if got := errText(err); got != tt.wantErr {
				t.Errorf("got error %q, want %q", got, tt.wantErr)
			}
		})
	}
}

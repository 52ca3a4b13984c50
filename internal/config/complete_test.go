package config

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const (
	kubeletGood = "testdata/kubelet-good.yaml"
	nodeHard    = "testdata/node-config-hard.yaml"
	nodeFull    = "testdata/node-config-full.yaml"
	nodeAlloc   = "testdata/node-config-allocatable.yaml"
)

// TestPrecedence: a flag given on the command line beats --config, which
// beats --node-config, which beats the default; maps are replaced whole.
func TestPrecedence(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		got        func(*Config) any
		want       any
		wantSource string // Sources[flag] for the setting
		flag       string
		wantNote   string // a note that must be among c.Notes
	}{
		{name: "hard from node-config", args: []string{"--node-config=" + nodeHard},
			got:  func(c *Config) any { return c.Settings.Hard["nodefs.available"] },
			want: "500Mi", flag: "eviction-hard", wantSource: "kubeletArguments.eviction-hard in " + nodeHard},
		{name: "config beats node-config", args: []string{"--node-config=" + nodeHard, "--config=" + kubeletGood},
			got:  func(c *Config) any { return c.Settings.Hard },
			want: map[string]string{"memory.available": "500Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%"},
			flag: "eviction-hard", wantSource: "evictionHard in " + kubeletGood,
			wantNote: "kubeletArguments.eviction-hard in " + nodeHard + " is overridden by evictionHard in " + kubeletGood + "."},
		{name: "flag beats both and replaces the map whole",
			args: []string{"--node-config=" + nodeHard, "--config=" + kubeletGood, "--eviction-hard=memory.available<2Gi"},
			got:  func(c *Config) any { return c.Settings.Hard },
			want: map[string]string{"memory.available": "2Gi"},
			flag: "eviction-hard", wantSource: "--eviction-hard",
			wantNote: "evictionHard in " + kubeletGood + " is overridden by --eviction-hard."},
		{name: "flag note names node-config too",
			args: []string{"--node-config=" + nodeHard, "--config=" + kubeletGood, "--eviction-hard=memory.available<2Gi"},
			got:  func(c *Config) any { return c.Settings.HardSource },
			want: "--eviction-hard", flag: "eviction-hard", wantSource: "--eviction-hard",
			wantNote: "kubeletArguments.eviction-hard in " + nodeHard + " is overridden by --eviction-hard."},
		{name: "duration from node-config", args: []string{"--node-config=" + nodeFull},
			got:  func(c *Config) any { return c.PressureTransitionPeriod },
			want: 5 * time.Minute, flag: "eviction-pressure-transition-period",
			wantSource: "kubeletArguments.eviction-pressure-transition-period in " + nodeFull},
		{name: "duration: config beats node-config", args: []string{"--node-config=" + nodeFull, "--config=" + kubeletGood},
			got:  func(c *Config) any { return c.PressureTransitionPeriod },
			want: 3 * time.Minute, flag: "eviction-pressure-transition-period",
			wantSource: "evictionPressureTransitionPeriod in " + kubeletGood},
		{name: "duration: flag beats both",
			args: []string{"--node-config=" + nodeFull, "--config=" + kubeletGood, "--eviction-pressure-transition-period=1m"},
			got:  func(c *Config) any { return c.PressureTransitionPeriod },
			want: time.Minute, flag: "eviction-pressure-transition-period", wantSource: "--eviction-pressure-transition-period"},
		{name: "flag equal to the default still wins",
			args: []string{"--config=" + kubeletGood, "--kernel-memcg-notification=true"},
			got:  func(c *Config) any { return c.KernelMemcgNotification },
			want: true, flag: "kernel-memcg-notification", wantSource: "--kernel-memcg-notification"},
		{name: "precedence is per setting: node-config fills what config lacks",
			args: []string{"--node-config=" + nodeAlloc, "--config=testdata/kubelet-partial-hard.yaml"},
			got:  func(c *Config) any { return []any{c.SystemReservedMemory, c.Settings.Soft, c.Settings.Hard} },
			want: []any{int64(2 << 30), map[string]string{"memory.available": "1Gi"}, map[string]string{"memory.available": "500Mi"}},
			flag: "system-reserved", wantSource: "kubeletArguments.system-reserved in " + nodeAlloc},
		{name: "merge switch from config, overridden by flag",
			args: []string{"--config=testdata/kubelet-partial-hard-merge.yaml", "--merge-default-eviction-settings=false"},
			got:  func(c *Config) any { return []any{c.Settings.MergeDefaults, len(c.Thresholds)} },
			want: []any{false, 2}, flag: "merge-default-eviction-settings", wantSource: "--merge-default-eviction-settings"},
		{name: "merge-default-eviction-settings is not read from kubeletArguments",
			args: []string{"--node-config=" + writeTemp(t, "kubeletArguments:\n  merge-default-eviction-settings: [\"true\"]\n")},
			got:  func(c *Config) any { return c.Settings.MergeDefaults },
			want: false, flag: "merge-default-eviction-settings", wantSource: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := complete(tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.got(c); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
			if got := c.Sources[tt.flag]; got != tt.wantSource {
				t.Errorf("source of %s: got %q, want %q", tt.flag, got, tt.wantSource)
			}
			if tt.wantNote != "" && !contains(c.Notes, tt.wantNote) {
				t.Errorf("notes: got %q, want one to be %q", c.Notes, tt.wantNote)
			}
		})
	}
}

// TestPartialMaps: a partial hard map replaces the defaults (with a note)
// unless merging is on, wherever the map comes from.
func TestPartialMaps(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"defaults", nil, []string{"memory.available<100Mi", "allocatableMemory.available<100Mi",
			"nodefs.available<10%", "nodefs.inodesFree<5%", "imagefs.available<15%", "imagefs.inodesFree<5%"}},
		{"partial flag map", []string{"--eviction-hard=memory.available<1Gi"},
			[]string{"memory.available<1Gi", "allocatableMemory.available<1Gi"}},
		{"partial flag map merged", []string{"--eviction-hard=memory.available<1Gi", "--merge-default-eviction-settings"},
			[]string{"memory.available<1Gi", "allocatableMemory.available<1Gi",
				"nodefs.available<10%", "nodefs.inodesFree<5%", "imagefs.available<15%", "imagefs.inodesFree<5%"}},
		{"partial config map", []string{"--config=testdata/kubelet-partial-hard.yaml"},
			[]string{"memory.available<500Mi", "allocatableMemory.available<500Mi"}},
		{"partial config map merged", []string{"--config=testdata/kubelet-partial-hard-merge.yaml"},
			[]string{"memory.available<500Mi", "allocatableMemory.available<500Mi",
				"nodefs.available<10%", "nodefs.inodesFree<5%", "imagefs.available<15%", "imagefs.inodesFree<5%"}},
		{"partial node-config map merged by flag", []string{"--node-config=" + nodeAlloc, "--merge-default-eviction-settings"},
			[]string{"memory.available<512Mi", "memory.available<1Gi soft 30s", "allocatableMemory.available<512Mi",
				"nodefs.available<10%", "nodefs.inodesFree<5%", "imagefs.available<15%", "imagefs.inodesFree<5%"}},
		{"empty config map disables", []string{"--config=testdata/kubelet-empty-hard.yaml"}, nil},
		{"0% disables one signal", []string{"--eviction-hard=memory.available<100Mi,nodefs.available<0%", "--merge-default-eviction-settings"},
			[]string{"memory.available<100Mi", "allocatableMemory.available<100Mi",
				"nodefs.inodesFree<5%", "imagefs.available<15%", "imagefs.inodesFree<5%"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := complete(tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := signalsOf(c.Thresholds); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	c, err := complete("--eviction-hard=memory.available<1Gi")
	if err != nil {
		t.Fatal(err)
	}
	want := "--eviction-hard replaces the default hard thresholds, so nodefs.available<10%, nodefs.inodesFree<5%, imagefs.available<15%, imagefs.inodesFree<5% no longer apply (as in the kubelet); list them, or set mergeDefaultEvictionSettings, to keep them"
	if !contains(c.Notes, want) {
		t.Errorf("notes: got %q, want one to be %q", c.Notes, want)
	}
}

func TestFormatThresholdsDefault(t *testing.T) {
	c, err := complete()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := FormatThresholds(&b, c); err != nil {
		t.Fatal(err)
	}
	const want = `SIGNAL                       OP  VALUE  GRACE  MIN-RECLAIM  KIND  SOURCE
memory.available             <   100Mi  -      -            hard  default
allocatableMemory.available  <   100Mi  -      -            hard  derived from memory.available (enforce-node-allocatable=pods)
nodefs.available             <   10%    -      -            hard  default
nodefs.inodesFree            <   5%     -      -            hard  default
imagefs.available            <   15%    -      -            hard  default
imagefs.inodesFree           <   5%     -      -            hard  default
`
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestFormatThresholdsAsWritten(t *testing.T) {
	c, err := complete("--node-config="+nodeAlloc, "--eviction-minimum-reclaim=memory.available=.25Gi",
		"--eviction-soft=memory.available<1Gi,nodefs.available<20%", "--eviction-soft-grace-period=memory.available=30s,nodefs.available=0s")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := FormatThresholds(&b, c); err != nil {
		t.Fatal(err)
	}
	const n = nodeAlloc
	want := `SIGNAL                       OP  VALUE  GRACE  MIN-RECLAIM  KIND            SOURCE
memory.available             <   .5Gi   -      .25Gi        hard            kubeletArguments.eviction-hard in ` + n + `
memory.available             <   1Gi    30s    .25Gi        soft            --eviction-soft
allocatableMemory.available  <   512Mi  -      256Mi        hard            derived from memory.available (enforce-node-allocatable=pods)
nodefs.available             <   20%    0s     -            soft (as hard)  --eviction-soft
`
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestFormatThresholdsNone(t *testing.T) {
	c, err := complete("--eviction-hard=")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := FormatThresholds(&b, c); err != nil {
		t.Fatal(err)
	}
	want := "SIGNAL  OP  VALUE  GRACE  MIN-RECLAIM  KIND  SOURCE\n(none: evictd will not evict)\n"
	if got := b.String(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// writeTemp writes content to a fresh file and returns its path.
func writeTemp(t *testing.T, content string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "file.yaml")
	if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// FuzzFiles feeds arbitrary bytes to both file readers: Complete must
// return a Config or an error, never panic.
func FuzzFiles(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.yaml")
	for _, s := range seeds {
		if data, err := os.ReadFile(s); err == nil {
			f.Add(data)
		}
	}
	for _, s := range []string{"", "null", "[]", "42", "\x00\xff", "kubeletArguments: null",
		"kubeletArguments: {eviction-hard: [null]}", "kubeletArguments: {eviction-hard: [[1]]}",
		"kubeletArguments: {eviction-hard: [{a: b}]}", "kubeletArguments: {eviction-max-pod-grace-period: [1e99]}",
		"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard: null\nevictionMaxPodGracePeriod: 99999999999",
		"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionSoft: {memory.available: 1Gi}\nevictionSoftGracePeriod: {memory.available: -1s}",
		"apiVersion: [1]\nkind: {a: 1}", "nodeName: [x]\nkubeletArguments: {hostname-override: [\"\"]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "f.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, flag := range []string{"--config=", "--node-config="} {
			c, err := complete(flag + path)
			if (c == nil) == (err == nil) {
				t.Fatalf("%s: got config %v and error %v, want exactly one", flag, c, err)
			}
			if c != nil {
				if err := FormatThresholds(&strings.Builder{}, c); err != nil {
					t.Fatalf("FormatThresholds: %v", err)
				}
			}
		}
	})
}

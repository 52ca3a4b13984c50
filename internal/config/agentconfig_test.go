package config

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

const agentHeader = "apiVersion: config.evictd.io/v1alpha1\nkind: AgentConfiguration\n"

// completeIn completes a configuration from args after writing files
// (name → content) into a fresh directory; "DIR" in args and in the
// files' content is that directory.
func completeIn(t *testing.T, files map[string]string, args ...string) (string, *Config, error) {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		files[name] = strings.ReplaceAll(text, "DIR", dir)
	}
	writeFiles(t, dir, files)
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "DIR", dir)
	}
	c, err := complete(args...)
	return dir, c, err
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestEveryFlagHasAField: every agent flag has a field in the file or is
// listed as command-line-only with its reason; every field is a flag's,
// and is named as the kubelet names it or the flag in camelCase.
func TestEveryFlagHasAField(t *testing.T) {
	fs, _ := NewFlagSet("evictd")
	flags := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) {
		flags[f.Name] = true
		_, field := FileField(f.Name)
		reason, cli := CommandLineOnly(f.Name)
		switch {
		case field && cli:
			t.Errorf("--%s has a file field and is listed as command-line-only", f.Name)
		case !field && !cli:
			t.Errorf("--%s has no field in %s and is not listed as command-line-only (fields and commandLineOnly in fields.go)", f.Name, AgentKind)
		case cli && reason == "":
			t.Errorf("--%s is command-line-only without a reason", f.Name)
		}
	})
	names := map[string]string{}
	for _, f := range fields {
		if !flags[f.flag] {
			t.Errorf("field %s names --%s, which evictd does not have", f.name, f.flag)
		}
		if other, dup := names[f.name]; dup {
			t.Errorf("field %s is --%s's and --%s's", f.name, other, f.flag)
		}
		names[f.name] = f.flag
		if want := camelFlag(f.flag); f.name != want && kubeletNames[f.flag] != f.name {
			t.Errorf("--%s's field is %s: want %s (the flag in camelCase), or list the kubelet's name in kubeletNames", f.flag, f.name, want)
		}
	}
	for flag := range commandLineOnly {
		if flag != "version" && !flags[flag] {
			t.Errorf("commandLineOnly lists --%s, which evictd does not have", flag)
		}
	}
}

// kubeletNames are the fields named after the KubeletConfiguration's
// rather than their flag.
var kubeletNames = map[string]string{
	"minimum-image-ttl-duration": "imageMinimumGCAge",
}

// camelFlag writes a flag's name in camelCase, with the acronyms the
// kubelet's fields write in capitals.
func camelFlag(flag string) string {
	parts := strings.Split(flag, "-")
	for i, p := range parts {
		switch {
		case p == "tls" || p == "qps":
			parts[i] = strings.ToUpper(p)
		case i > 0:
			parts[i] = strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return strings.Join(parts, "")
}

// TestFieldAccessors: each field's accessor is the Options field its flag
// sets: a value given to the flag is read back through the accessor.
func TestFieldAccessors(t *testing.T) {
	for _, f := range fields {
		fs, o := NewFlagSet("evictd")
		var value string
		var want any
		switch f.ptr(o).(type) {
		case *string:
			value, want = "/x/y", "/x/y"
		case *bool:
			def := *f.ptr(o).(*bool)
			value, want = map[bool]string{true: "false", false: "true"}[def], !def
		case *int:
			value, want = "7", 7
		case *int32:
			value, want = "7", int32(7)
		case *float64:
			value, want = "0.25", 0.25
		case *time.Duration:
			value, want = "7s", 7*time.Second
		case *[]string:
			value, want = "a,b", []string{"a", "b"}
		case *map[string]string:
			value, want = "memory.available=7Mi", map[string]string{"memory.available": "7Mi"}
			if err := fs.Set(f.flag, value); err != nil {
				value = "memory.available<7Mi"
			}
		case *map[string]bool:
			value, want = "Gate=true", map[string]bool{"Gate": true}
		}
		if err := fs.Set(f.flag, value); err != nil {
			t.Errorf("--%s=%s: %v", f.flag, value, err)
			continue
		}
		if got := reflect.ValueOf(f.ptr(o)).Elem().Interface(); !reflect.DeepEqual(got, want) {
			t.Errorf("--%s=%s: the accessor of %s reads %#v, want %#v", f.flag, value, f.name, got, want)
		}
	}
}

// TestAgentConfigDecoding: evictd's own file, strict, lenient, and
// refused, with errors naming the file, the field and the value.
func TestAgentConfigDecoding(t *testing.T) {
	for _, tc := range []struct {
		name, file  string
		check       func(t *testing.T, c *Config)
		wantLenient string // part of the lenient decoding's warning
		wantErr     string // the error, "F" for the file
	}{
		{name: "strict", file: agentHeader + `evictionHard: {memory.available: 1Gi, nodefs.available: "10%"}
evictionSoft: {memory.available: 2Gi}
evictionSoftGracePeriod: {memory.available: 1m30s}
systemReserved: {memory: 1Gi, pid: 1000}
maxEvictionsPerHour: 12
localStorageEvictionQPS: 0.5
evictionMaxPodGracePeriod: -1
housekeepingInterval: 5s
hardEvictionLocalStop: false
enforceNodeAllocatable: [pods, system-reserved]
cgroupDriver: systemd
featureGates: {HugepageAwareEviction: false}
`, check: func(t *testing.T, c *Config) {
			if c.MaxEvictionsPerHour != 12 || c.LocalStorageEvictionQPS != 0.5 || c.MaxPodGracePeriodSeconds != -1 || c.HousekeepingInterval != 5*time.Second ||
				c.HardEvictionLocalStop || c.CgroupDriver != "systemd" || c.HugepageAwareEviction || c.SystemReservedMemory != 1<<30 {
				t.Errorf("got %+v", c)
			}
			if want := []string{"pods", "system-reserved"}; !slices.Equal(c.EnforceNodeAllocatable, want) {
				t.Errorf("enforceNodeAllocatable: got %v, want %v", c.EnforceNodeAllocatable, want)
			}
			if want := map[string]string{"memory.available": "1Gi", "nodefs.available": "10%"}; !maps.Equal(c.Settings.Hard, want) {
				t.Errorf("evictionHard: got %v, want %v", c.Settings.Hard, want)
			}
			if c.Lenient != nil || c.Deprecations != nil {
				t.Errorf("got lenient decodings %v, deprecations %q; want none", c.Lenient, c.Deprecations)
			}
		}},
		{name: "JSON", file: `{"apiVersion": "config.evictd.io/v1alpha1", "kind": "AgentConfiguration", "dryRun": true}`,
			check: func(t *testing.T, c *Config) {
				if !c.DryRun {
					t.Error("dryRun not taken from a JSON file")
				}
			}},
		{name: "null is not set", file: agentHeader + "housekeepingInterval: null\n",
			check: func(t *testing.T, c *Config) {
				if c.HousekeepingInterval != 10*time.Second || c.Sources["housekeeping-interval"] != "" {
					t.Errorf("got %s from %q, want the default", c.HousekeepingInterval, c.Sources["housekeeping-interval"])
				}
			}},
		{name: "unknown field", file: agentHeader + "housekeepingIntervall: 5s\ndryRun: true\n",
			wantLenient: `AgentConfiguration F (--config) is not valid strictly, so evictd decoded it leniently, as the kubelet decodes its own: ignored unknown field(s) "housekeepingIntervall" (from a newer evictd, or misspelt: a misspelt setting keeps its default).`,
			check: func(t *testing.T, c *Config) {
				if !c.DryRun || c.HousekeepingInterval != 10*time.Second {
					t.Errorf("dryRun %v, housekeeping interval %s: want the file's other fields taken", c.DryRun, c.HousekeepingInterval)
				}
			}},
		{name: "field names are case-sensitive", file: agentHeader + "DryRun: true\n",
			wantLenient: `ignored unknown field(s) "DryRun"`,
			check: func(t *testing.T, c *Config) {
				if c.DryRun {
					t.Error("DryRun taken for dryRun")
				}
			}},
		{name: "duplicate field", file: agentHeader + "maxEvictionsPerHour: 5\nmaxEvictionsPerHour: 7\n",
			wantLenient: `took the last of duplicate field(s) "maxEvictionsPerHour"`,
			check: func(t *testing.T, c *Config) {
				if c.MaxEvictionsPerHour != 7 {
					t.Errorf("got %d, want the last, 7", c.MaxEvictionsPerHour)
				}
			}},
		{name: "wrong kind", file: "apiVersion: config.evictd.io/v1alpha1\nkind: KubeletConfiguration\n",
			wantErr: `KubeletConfiguration F: apiVersion "config.evictd.io/v1alpha1", kind "KubeletConfiguration": want apiVersion "kubelet.config.k8s.io/v1beta1", kind "KubeletConfiguration"`},
		{name: "another component's kind", file: "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n",
			wantErr: `--config F: apiVersion "kubeproxy.config.k8s.io/v1alpha1", kind "KubeProxyConfiguration": want evictd's configuration, apiVersion "config.evictd.io/v1alpha1", kind "AgentConfiguration" (or, deprecated, a KubeletConfiguration, apiVersion "kubelet.config.k8s.io/v1beta1", which --import-kubelet-config imports)`},
		{name: "wrong apiVersion", file: "apiVersion: config.evictd.io/v1\nkind: AgentConfiguration\n",
			wantErr: `AgentConfiguration F: apiVersion "config.evictd.io/v1", kind "AgentConfiguration": want apiVersion "config.evictd.io/v1alpha1", kind "AgentConfiguration"`},
		{name: "no apiVersion", file: "kind: AgentConfiguration\ndryRun: true\n",
			wantErr: `AgentConfiguration F: apiVersion "", kind "AgentConfiguration": want apiVersion "config.evictd.io/v1alpha1", kind "AgentConfiguration"`},
		{name: "no kind", file: "dryRun: true\n",
			wantErr: `--config F: apiVersion "", kind "": want evictd's configuration`},
		{name: "not a mapping", file: "- dryRun\n",
			wantErr: `AgentConfiguration F: not a YAML mapping with apiVersion config.evictd.io/v1alpha1 and kind AgentConfiguration`},
		{name: "empty", file: "",
			wantErr: `AgentConfiguration F: not a YAML mapping with apiVersion config.evictd.io/v1alpha1 and kind AgentConfiguration`},
		{name: "not YAML", file: agentHeader + "evictionHard: [a\n",
			wantErr: `AgentConfiguration F: yaml: line 3: did not find expected ',' or ']'`},
		{name: "wrong type", file: agentHeader + "maxEvictionsPerHour: lots\n",
			wantErr: `AgentConfiguration F: maxEvictionsPerHour: invalid value "lots": want a whole number from -9223372036854775808 to 9223372036854775807`},
		{name: "not a whole number", file: agentHeader + "evictionMaxPodGracePeriod: 1.5\n",
			wantErr: `AgentConfiguration F: evictionMaxPodGracePeriod: invalid value 1.5: want a whole number from -2147483648 to 2147483647`},
		{name: "bad duration", file: agentHeader + "housekeepingInterval: 5x\n",
			wantErr: `AgentConfiguration F: housekeepingInterval: invalid value "5x": time: unknown unit "x" in duration "5x"`},
		{name: "duration as a number", file: agentHeader + "housekeepingInterval: 10\n",
			wantErr: `AgentConfiguration F: housekeepingInterval: invalid value 10: want a duration as a string, such as "1m30s"`},
		{name: "bool as a string", file: agentHeader + "dryRun: \"yes\"\n",
			wantErr: `AgentConfiguration F: dryRun: invalid value "yes": want true or false`},
		{name: "map as a flag's string", file: agentHeader + "evictionHard: memory.available<1Gi\n",
			wantErr: `AgentConfiguration F: evictionHard: invalid value "memory.available<1Gi": want a mapping of names to strings, such as {memory.available: 500Mi}`},
		{name: "list as a flag's string", file: agentHeader + "enforceNodeAllocatable: pods\n",
			wantErr: `AgentConfiguration F: enforceNodeAllocatable: invalid value "pods": want a list of strings, such as [pods]`},
		{name: "a bad field is an error even when unused", file: agentHeader + "dryRun: 1\n", wantErr: `dryRun: invalid value 1: want true or false`},
		{name: "bad value", file: agentHeader + "housekeepingInterval: 0s\n",
			wantErr: `housekeepingInterval in F: invalid value "0s": must be positive`},
		{name: "bad value of a string", file: agentHeader + "cgroupDriver: docker\n",
			wantErr: `cgroupDriver in F: invalid value "docker": must be "cgroupfs" or "systemd"`},
		{name: "bad threshold", file: agentHeader + "evictionHard: {memory.available: -1Gi}\n",
			wantErr: `evictionHard in F: eviction threshold memory.available must be positive: -1Gi`},
		{name: "bad map value", file: agentHeader + "systemReserved: {memory: [1]}\n",
			wantErr: `AgentConfiguration F: systemReserved: invalid value {"memory":[1]}: memory: want a string, such as "500Mi"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, c, err := completeIn(t, map[string]string{"config.yaml": tc.file}, "--config=DIR/config.yaml")
			f := filepath.Join(dir, "config.yaml")
			if tc.wantErr != "" {
				want := strings.ReplaceAll(tc.wantErr, "F", f)
				if got := errString(err); !strings.Contains(got, want) {
					t.Fatalf("got error %q, want %q", got, want)
				}
				if !strings.Contains(errString(err), f) {
					t.Errorf("error %q does not name the file", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantLenient != "" {
				want := strings.ReplaceAll(tc.wantLenient, "F", f)
				if len(c.Lenient) != 1 || !strings.Contains(c.Lenient[0].Warning, want) || c.Lenient[0].Path != f || c.Lenient[0].Flag != "--config" {
					t.Fatalf("got lenient decodings %+v, want one saying %q", c.Lenient, want)
				}
				if len(c.Warnings) == 0 || c.Warnings[0] != c.Lenient[0].Warning {
					t.Errorf("warnings %q do not start with the lenient decoding's", c.Warnings)
				}
			} else if c.Lenient != nil {
				t.Errorf("got lenient decodings %+v, want none", c.Lenient)
			}
			if c.ConfigFile != f {
				t.Errorf("ConfigFile %q, want %q", c.ConfigFile, f)
			}
			tc.check(t, c)
		})
	}
}

// TestDropIns: --config-dir's *.conf files, in lexical order and
// subdirectories included, merged over --config as the kubelet merges its
// own: fields replaced, lists whole, maps key by key, null unsetting.
func TestDropIns(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		args    []string
		check   func(t *testing.T, c *Config)
		wantErr string
	}{
		{name: "later files override earlier ones and the file",
			files: map[string]string{
				"config.yaml":    agentHeader + "maxEvictionsPerHour: 5\nhousekeepingInterval: 5s\nenforceNodeAllocatable: [pods, kube-reserved]\n",
				"d/20-b.conf":    agentHeader + "maxEvictionsPerHour: 20\n",
				"d/10-a.conf":    agentHeader + "maxEvictionsPerHour: 10\nenforceNodeAllocatable: [none]\n",
				"d/sub/30.conf":  agentHeader + "housekeepingInterval: 30s\n",
				"d/40.yaml":      agentHeader + "maxEvictionsPerHour: 40\n",
				"d/README":       "not a drop-in\n",
				"d/15-none.conf": agentHeader,
			},
			args: []string{"--config=DIR/config.yaml", "--config-dir=DIR/d"},
			check: func(t *testing.T, c *Config) {
				if c.MaxEvictionsPerHour != 20 || c.HousekeepingInterval != 30*time.Second || !slices.Equal(c.EnforceNodeAllocatable, []string{"none"}) {
					t.Errorf("got %d, %s, %v; want 20 (20-b.conf), 30s (sub/30.conf), [none] (10-a.conf, the list whole)", c.MaxEvictionsPerHour, c.HousekeepingInterval, c.EnforceNodeAllocatable)
				}
				dir := filepath.Dir(c.ConfigFile)
				wantOrder := []string{"d/10-a.conf", "d/15-none.conf", "d/20-b.conf", "d/sub/30.conf"}
				for i := range wantOrder {
					wantOrder[i] = filepath.Join(dir, wantOrder[i])
				}
				if !slices.Equal(c.ConfigDropIns, wantOrder) {
					t.Errorf("drop-ins %q, want %q", c.ConfigDropIns, wantOrder)
				}
				if got, want := c.Sources["max-evictions-per-hour"], "maxEvictionsPerHour in "+filepath.Join(dir, "d/20-b.conf"); got != want {
					t.Errorf("source %q, want %q", got, want)
				}
				for _, n := range []string{
					"maxEvictionsPerHour in " + c.ConfigFile + " is overridden by maxEvictionsPerHour in " + filepath.Join(dir, "d/10-a.conf") + ".",
					"--config-dir " + filepath.Join(dir, "d") + ": skipped " + filepath.Join(dir, "d/40.yaml") + ", " + filepath.Join(dir, "d/README") + ", which do not end in .conf, as the kubelet does.",
				} {
					if !contains(c.Notes, n) {
						t.Errorf("notes %q, want %q among them", c.Notes, n)
					}
				}
			}},
		{name: "maps merge key by key",
			files: map[string]string{
				"config.yaml": agentHeader + "evictionHard: {memory.available: 1Gi, nodefs.available: \"10%\"}\nsystemReserved: {memory: 1Gi}\n",
				"d/10.conf":   agentHeader + "evictionHard: {memory.available: 2Gi, pid.available: \"5%\"}\nsystemReserved: {memory: null, cpu: 500m}\n",
			},
			args: []string{"--config=DIR/config.yaml", "--config-dir=DIR/d"},
			check: func(t *testing.T, c *Config) {
				if want := map[string]string{"memory.available": "2Gi", "nodefs.available": "10%", "pid.available": "5%"}; !maps.Equal(c.Settings.Hard, want) {
					t.Errorf("evictionHard %v, want %v", c.Settings.Hard, want)
				}
				if _, ok := c.SystemReserved["memory"]; ok || c.SystemReservedMemory != 0 || len(c.SystemReserved) != 1 {
					t.Errorf("systemReserved %v: want memory removed by null, cpu added", c.SystemReserved)
				}
				drop := filepath.Join(filepath.Dir(c.ConfigFile), "d/10.conf")
				if got, want := c.Settings.HardSource, "evictionHard in "+c.ConfigFile+" + evictionHard in "+drop; got != want {
					t.Errorf("hard source %q, want %q", got, want)
				}
			}},
		{name: "a drop-in's map merges over the default thresholds, as the kubelet's",
			files: map[string]string{"d/10.conf": agentHeader + "evictionHard: {memory.available: 500Mi}\n"},
			args:  []string{"--config-dir=DIR/d"},
			check: func(t *testing.T, c *Config) {
				want := map[string]string{"memory.available": "500Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%", "imagefs.inodesFree": "5%"}
				if !maps.Equal(c.Settings.Hard, want) {
					t.Errorf("evictionHard %v, want %v", c.Settings.Hard, want)
				}
				for _, n := range c.Notes {
					if strings.Contains(n, "replaces the default hard thresholds") {
						t.Errorf("note %q: the drop-in kept the defaults", n)
					}
				}
			}},
		{name: "a drop-in's map merges over the imported one",
			files: map[string]string{
				"kubelet.yaml": kubeletHeader + "evictionHard: {memory.available: 1Gi, nodefs.available: \"20%\"}\n",
				"d/10.conf":    agentHeader + "evictionHard: {memory.available: 500Mi}\n",
			},
			args: []string{"--import-kubelet-config=DIR/kubelet.yaml", "--config-dir=DIR/d"},
			check: func(t *testing.T, c *Config) {
				if want := map[string]string{"memory.available": "500Mi", "nodefs.available": "20%"}; !maps.Equal(c.Settings.Hard, want) {
					t.Errorf("evictionHard %v, want %v", c.Settings.Hard, want)
				}
			}},
		{name: "the --config file's map replaces the imported one whole",
			files: map[string]string{
				"kubelet.yaml": kubeletHeader + "evictionHard: {memory.available: 1Gi, nodefs.available: \"20%\"}\n",
				"config.yaml":  agentHeader + "evictionHard: {memory.available: 500Mi}\n",
			},
			args: []string{"--import-kubelet-config=DIR/kubelet.yaml", "--config=DIR/config.yaml"},
			check: func(t *testing.T, c *Config) {
				if want := map[string]string{"memory.available": "500Mi"}; !maps.Equal(c.Settings.Hard, want) {
					t.Errorf("evictionHard %v, want %v", c.Settings.Hard, want)
				}
			}},
		{name: "null in a drop-in unsets the file's field",
			files: map[string]string{
				"config.yaml": agentHeader + "maxEvictionsPerHour: 5\n",
				"d/10.conf":   agentHeader + "maxEvictionsPerHour: null\n",
			},
			args: []string{"--config=DIR/config.yaml", "--config-dir=DIR/d"},
			check: func(t *testing.T, c *Config) {
				if c.MaxEvictionsPerHour != 60 || c.Sources["max-evictions-per-hour"] != "" {
					t.Errorf("got %d from %q, want the default 60", c.MaxEvictionsPerHour, c.Sources["max-evictions-per-hour"])
				}
			}},
		{name: "feature gates merge gate by gate",
			files: map[string]string{
				"config.yaml": agentHeader + "featureGates: {HugepageAwareEviction: false, MemoryQoS: true}\n",
				"d/10.conf":   agentHeader + "featureGates: {HugepageAwareEviction: true}\n",
			},
			args: []string{"--config=DIR/config.yaml", "--config-dir=DIR/d"},
			check: func(t *testing.T, c *Config) {
				drop := filepath.Join(filepath.Dir(c.ConfigFile), "d/10.conf")
				if !c.HugepageAwareEviction || c.Sources["feature-gates"] != "featureGates in "+drop {
					t.Errorf("got %v from %q, want true from the drop-in", c.HugepageAwareEviction, c.Sources["feature-gates"])
				}
				if n := "featureGates in " + c.ConfigFile + " for HugepageAwareEviction is overridden by featureGates in " + drop + "."; !contains(c.Notes, n) {
					t.Errorf("notes %q, want %q", c.Notes, n)
				}
			}},
		{name: "drop-ins without --config", files: map[string]string{"d/10.conf": agentHeader + "dryRun: true\n"},
			args: []string{"--config-dir=DIR/d"},
			check: func(t *testing.T, c *Config) {
				if !c.DryRun || c.ConfigFile != "" {
					t.Errorf("dryRun %v, ConfigFile %q", c.DryRun, c.ConfigFile)
				}
			}},
		{name: "a drop-in decoded leniently", files: map[string]string{"d/10.conf": agentHeader + "dryRunn: true\n"},
			args: []string{"--config-dir=DIR/d"},
			check: func(t *testing.T, c *Config) {
				if len(c.Lenient) != 1 || c.Lenient[0].Flag != "--config-dir" || !strings.HasSuffix(c.Lenient[0].Path, "10.conf") {
					t.Errorf("lenient decodings %+v, want the drop-in's", c.Lenient)
				}
			}},
		{name: "a drop-in of another kind", files: map[string]string{"d/10.conf": kubeletHeader + "evictionHard: {}\n"},
			args:    []string{"--config-dir=DIR/d"},
			wantErr: `AgentConfiguration DIR/d/10.conf: apiVersion "kubelet.config.k8s.io/v1beta1", kind "KubeletConfiguration": want apiVersion "config.evictd.io/v1alpha1", kind "AgentConfiguration"`},
		{name: "a drop-in without a kind", files: map[string]string{"d/10.conf": "dryRun: true\n"},
			args:    []string{"--config-dir=DIR/d"},
			wantErr: `AgentConfiguration DIR/d/10.conf: apiVersion "", kind ""`},
		{name: "a drop-in's bad value", files: map[string]string{"d/10.conf": agentHeader + "logLevel: loud\n"},
			args:    []string{"--config-dir=DIR/d"},
			wantErr: `logLevel in DIR/d/10.conf: invalid value "loud": want debug, info, warn or error`},
		{name: "missing directory", args: []string{"--config-dir=DIR/none"},
			wantErr: `read --config-dir DIR/none: lstat DIR/none: no such file or directory`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.files == nil {
				tc.files = map[string]string{}
			}
			dir, c, err := completeIn(t, tc.files, tc.args...)
			if tc.wantErr != "" {
				if want := strings.ReplaceAll(tc.wantErr, "DIR", dir); !strings.Contains(errString(err), want) {
					t.Fatalf("got error %q, want %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

// TestLayers: per setting, the command line beats the --config-dir
// drop-ins, which beat the --config file, which beats the imported
// KubeletConfiguration, which beats --node-config, which beats the
// default; the notes say what is overridden, Sources and Provenance what
// won.
func TestLayers(t *testing.T) {
	files := map[string]string{
		"node-config.yaml": "kubeletArguments:\n  eviction-pressure-transition-period: [\"1m\"]\n  cgroup-driver: [systemd]\n  eviction-max-pod-grace-period: [\"10\"]\n  node-status-update-frequency: [\"11s\"]\n  root-dir: [/n]\n",
		"kubelet.yaml":     kubeletHeader + "evictionPressureTransitionPeriod: 2m\ncgroupDriver: cgroupfs\nevictionMaxPodGracePeriod: 20\nnodeStatusUpdateFrequency: 12s\n",
		"config.yaml":      agentHeader + "evictionPressureTransitionPeriod: 3m\ncgroupDriver: systemd\nevictionMaxPodGracePeriod: 30\nimportKubeletConfig: DIR/kubelet.yaml\nnodeConfig: DIR/node-config.yaml\n",
		"d/10.conf":        agentHeader + "evictionPressureTransitionPeriod: 4m\ncgroupDriver: cgroupfs\n",
	}
	dir, c, err := completeIn(t, files, "--config=DIR/config.yaml", "--config-dir=DIR/d", "--eviction-pressure-transition-period=5m")
	if err != nil {
		t.Fatal(err)
	}
	in := func(name string) string { return filepath.Join(dir, name) }
	for _, tc := range []struct {
		flag       string
		got, want  any
		wantSource string
	}{
		{"eviction-pressure-transition-period", c.PressureTransitionPeriod, 5 * time.Minute, "--eviction-pressure-transition-period"},
		{"cgroup-driver", c.CgroupDriver, "cgroupfs", "cgroupDriver in " + in("d/10.conf")},
		{"eviction-max-pod-grace-period", c.MaxPodGracePeriodSeconds, int32(30), "evictionMaxPodGracePeriod in " + in("config.yaml")},
		{"node-status-update-frequency", c.NodeStatusUpdateFrequency, 12 * time.Second, "nodeStatusUpdateFrequency in " + in("kubelet.yaml")},
		{"root-dir", c.RootDir, "/n", "kubeletArguments.root-dir in " + in("node-config.yaml")},
		{"housekeeping-interval", c.HousekeepingInterval, 10 * time.Second, ""},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) || c.Sources[tc.flag] != tc.wantSource {
			t.Errorf("--%s: got %v from %q, want %v from %q", tc.flag, tc.got, c.Sources[tc.flag], tc.want, tc.wantSource)
		}
	}
	for _, n := range []string{
		"kubeletArguments.eviction-pressure-transition-period in " + in("node-config.yaml") + " is overridden by --eviction-pressure-transition-period.",
		"evictionPressureTransitionPeriod in " + in("kubelet.yaml") + " is overridden by --eviction-pressure-transition-period.",
		"evictionPressureTransitionPeriod in " + in("d/10.conf") + " is overridden by --eviction-pressure-transition-period.",
		"evictionPressureTransitionPeriod in " + in("config.yaml") + " is overridden by evictionPressureTransitionPeriod in " + in("d/10.conf") + ".",
		"evictionMaxPodGracePeriod in " + in("kubelet.yaml") + " is overridden by evictionMaxPodGracePeriod in " + in("config.yaml") + ".",
		"kubeletArguments.node-status-update-frequency in " + in("node-config.yaml") + " is overridden by nodeStatusUpdateFrequency in " + in("kubelet.yaml") + ".",
	} {
		if !contains(c.Notes, n) {
			t.Errorf("notes %q\nwant %q among them", c.Notes, n)
		}
	}
	if c.ImportedKubeletConfig != in("kubelet.yaml") || c.NodeConfigFile != in("node-config.yaml") || c.Deprecations != nil {
		t.Errorf("imported %q and %q (deprecations %q), want the files the --config file names", c.ImportedKubeletConfig, c.NodeConfigFile, c.Deprecations)
	}

	// The command line names the imports over the file.
	writeFiles(t, dir, map[string]string{"other.yaml": kubeletHeader + "nodeStatusUpdateFrequency: 13s\n"})
	c, err = complete("--config="+in("config.yaml"), "--import-kubelet-config="+in("other.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeStatusUpdateFrequency != 13*time.Second || c.ImportedKubeletConfig != in("other.yaml") {
		t.Errorf("got %s from %q, want 13s from the command line's import", c.NodeStatusUpdateFrequency, c.ImportedKubeletConfig)
	}
}

// TestDeprecatedKubeletConfig: a KubeletConfiguration given to --config is
// still imported, with a deprecation warning naming --import-kubelet-config.
func TestDeprecatedKubeletConfig(t *testing.T) {
	c, err := complete("--config=" + kubeletGood)
	if err != nil {
		t.Fatal(err)
	}
	imported, err := complete("--import-kubelet-config=" + kubeletGood)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(describeAll(c.Thresholds), describeAll(imported.Thresholds)) || c.CgroupDriver != imported.CgroupDriver ||
		!maps.Equal(c.Sources, withoutKey(imported.Sources, "import-kubelet-config")) {
		t.Errorf("--config and --import-kubelet-config differ:\n%q %v\n%q %v", describeAll(c.Thresholds), c.Sources, describeAll(imported.Thresholds), imported.Sources)
	}
	want := "--config " + kubeletGood + " is a KubeletConfiguration: evictd imported its eviction settings as before, but a KubeletConfiguration given to --config is deprecated: " +
		"give it as --import-kubelet-config " + kubeletGood + " (the same import, with the same precedence), and give --config evictd's own configuration file, apiVersion config.evictd.io/v1alpha1, kind AgentConfiguration (docs/CONFIGURATION.md)."
	if !slices.Equal(c.Deprecations, []string{want}) || !contains(c.Warnings, want) {
		t.Errorf("deprecations %q, warnings %q; want %q in both", c.Deprecations, c.Warnings, want)
	}
	if imported.Deprecations != nil || contains(imported.Warnings, want) {
		t.Errorf("--import-kubelet-config: deprecations %q", imported.Deprecations)
	}
	if c.ImportedKubeletConfig != kubeletGood || c.ConfigFile != kubeletGood {
		t.Errorf("ImportedKubeletConfig %q, ConfigFile %q", c.ImportedKubeletConfig, c.ConfigFile)
	}
	for _, p := range c.Provenance() {
		if p.Flag == "eviction-hard" && (p.Source.Kind != SourceKubeletConfig || p.Source.File != kubeletGood) {
			t.Errorf("provenance %+v, want the kubelet import", p)
		}
	}

	_, err = complete("--config="+kubeletGood, "--import-kubelet-config="+kubeletGood)
	if got := errString(err); !strings.Contains(got, "is a KubeletConfiguration and --import-kubelet-config "+kubeletGood+" is given too") {
		t.Errorf("both: got error %q", got)
	}
}

func withoutKey(m map[string]string, k string) map[string]string {
	m = maps.Clone(m)
	delete(m, k)
	return m
}

// TestProvenance: each setting's value as text and where it came from.
func TestProvenance(t *testing.T) {
	files := map[string]string{
		"node-config.yaml": "kubeletArguments:\n  root-dir: [/n]\n  feature-gates: [\"A=true\"]\n",
		"kubelet.yaml":     kubeletHeader + "cgroupDriver: systemd\nevictionSoft: {memory.available: 1Gi}\n",
		"config.yaml":      agentHeader + "evictionSoftGracePeriod: {memory.available: 1m}\nmaxEvictionsPerHour: 9\nenforceNodeAllocatable: [pods, kube-reserved]\nfeatureGates: {HugepageAwareEviction: false}\n",
		"d/10.conf":        agentHeader + "evictionHard: {memory.available: 500Mi}\nlocalStorageEvictionQPS: 0.5\n",
	}
	dir, c, err := completeIn(t, files, "--node-config=DIR/node-config.yaml", "--import-kubelet-config=DIR/kubelet.yaml",
		"--config=DIR/config.yaml", "--config-dir=DIR/d", "--dry-run", "--feature-gates=B=false")
	if err != nil {
		t.Fatal(err)
	}
	in := func(name string) string { return filepath.Join(dir, name) }
	def := Source{Kind: SourceDefault}
	cli := func(flag string) Source { return Source{Kind: SourceCommandLine, Key: "--" + flag} }
	file := Source{Kind: SourceConfigFile, File: in("config.yaml")}
	drop := Source{Kind: SourceDropIn, File: in("d/10.conf")}
	with := func(s Source, key string) Source { s.Key = key; return s }
	want := []Setting{
		{"evictionHard", "eviction-hard", "imagefs.available", "15%", def},
		{"evictionHard", "eviction-hard", "imagefs.inodesFree", "5%", def},
		{"evictionHard", "eviction-hard", "memory.available", "500Mi", with(drop, "evictionHard")},
		{"evictionHard", "eviction-hard", "nodefs.available", "10%", def},
		{"evictionHard", "eviction-hard", "nodefs.inodesFree", "5%", def},
		{"evictionSoft", "eviction-soft", "memory.available", "1Gi", Source{SourceKubeletConfig, in("kubelet.yaml"), "evictionSoft"}},
		{"evictionSoftGracePeriod", "eviction-soft-grace-period", "memory.available", "1m", with(file, "evictionSoftGracePeriod")},
		{"evictionMinimumReclaim", "eviction-minimum-reclaim", "", "", def},
		{"evictionPressureTransitionPeriod", "eviction-pressure-transition-period", "", "5m0s", def},
		{"enforceNodeAllocatable", "enforce-node-allocatable", "", "pods,kube-reserved", with(file, "enforceNodeAllocatable")},
		{"featureGates", "feature-gates", "A", "true", Source{SourceNodeConfig, in("node-config.yaml"), "kubeletArguments.feature-gates"}},
		{"featureGates", "feature-gates", "B", "false", cli("feature-gates")},
		{"featureGates", "feature-gates", "HugepageAwareEviction", "false", with(file, "featureGates")},
		{"maxEvictionsPerHour", "max-evictions-per-hour", "", "9", with(file, "maxEvictionsPerHour")},
		{"localStorageEvictionQPS", "local-storage-eviction-qps", "", "0.5", with(drop, "localStorageEvictionQPS")},
		{"dryRun", "dry-run", "", "true", cli("dry-run")},
		{"rootDir", "root-dir", "", "/n", Source{SourceNodeConfig, in("node-config.yaml"), "kubeletArguments.root-dir"}},
		{"cgroupDriver", "cgroup-driver", "", "systemd", Source{SourceKubeletConfig, in("kubelet.yaml"), "cgroupDriver"}},
		{"imageServiceEndpoint", "image-service-endpoint", "", "", def},
		{"nodeConfig", "node-config", "", in("node-config.yaml"), cli("node-config")},
	}
	got := map[string]Setting{}
	names := map[string]bool{}
	for _, s := range c.Provenance() {
		got[s.Name+"["+s.Key+"]"] = s
		names[s.Name] = true
	}
	for _, w := range want {
		if g := got[w.Name+"["+w.Key+"]"]; g != w {
			t.Errorf("%s[%s]: got %+v, want %+v", w.Name, w.Key, g, w)
		}
	}
	for _, f := range fields {
		if !names[f.name] {
			t.Errorf("no provenance for %s", f.name)
		}
	}
	for _, tc := range []struct {
		src  Source
		want string
	}{
		{def, "default"},
		{cli("dry-run"), "--dry-run"},
		{with(drop, "evictionHard"), "evictionHard in " + in("d/10.conf")},
		{Source{SourceNodeConfig, "/n.yaml", "kubeletArguments.root-dir"}, "kubeletArguments.root-dir in /n.yaml"},
	} {
		if got := tc.src.String(); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.src, got, tc.want)
		}
	}
	if (*Config)(nil).Provenance() != nil {
		t.Error("a nil Config has provenance")
	}
}

// TestExampleConfig: examples/config.yaml, docs/CONFIGURATION.md's full
// example, decodes strictly, gives every field and starts an agent; its
// values are the defaults.
func TestExampleConfig(t *testing.T) {
	const example = "../../examples/config.yaml"
	data, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	d, err := readAgentConfig(example, "--config", SourceConfigFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.lenient != nil {
		t.Fatalf("%s is not strictly valid: %s", example, d.lenient.Warning)
	}
	var order, want []string
	for _, m := range regexp.MustCompile(`(?m)^([a-zA-Z]+):`).FindAllStringSubmatch(string(data), -1) {
		if m[1] != "apiVersion" && m[1] != "kind" {
			order = append(order, m[1])
		}
	}
	for _, f := range fields {
		want = append(want, f.name)
	}
	if !slices.Equal(order, want) {
		t.Errorf("%s's fields are, in order,\n%q\nwant every field, in the order of fields (fields.go):\n%q", example, order, want)
	}
	c, err := complete("--config=" + example)
	if err != nil {
		t.Fatal(err)
	}
	defaults, err := complete()
	if err != nil {
		t.Fatal(err)
	}
	gotP, defP := c.Provenance(), defaults.Provenance()
	if len(gotP) != len(defP) {
		t.Fatalf("%d settings, the defaults %d", len(gotP), len(defP))
	}
	for i := range gotP {
		if gotP[i].Name != defP[i].Name || gotP[i].Key != defP[i].Key || gotP[i].Value != defP[i].Value {
			t.Errorf("%s[%s] = %q, the default is %q", gotP[i].Name, gotP[i].Key, gotP[i].Value, defP[i].Value)
		}
	}
	doc, err := os.ReadFile("../../docs/CONFIGURATION.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- examples/config.yaml -->\n```yaml\n(.*?)```\n").FindSubmatch(doc)
	if m == nil || string(m[1]) != string(data) {
		t.Errorf("docs/CONFIGURATION.md's full example (after <!-- examples/config.yaml -->) is not %s: copy it", example)
	}
}

// TestFileNamesFlagsAndFields: FileField and CommandLineOnly.
func TestFileNamesFlagsAndFields(t *testing.T) {
	for _, tc := range []struct {
		flag, want string
		ok         bool
	}{
		{"eviction-hard", "evictionHard", true},
		{"minimum-image-ttl-duration", "imageMinimumGCAge", true},
		{"metrics-tls-cert-file", "metricsTLSCertFile", true},
		{"config", "", false},
		{"no-such-flag", "", false},
	} {
		if got, ok := FileField(tc.flag); got != tc.want || ok != tc.ok {
			t.Errorf("FileField(%q) = %q, %v; want %q, %v", tc.flag, got, ok, tc.want, tc.ok)
		}
	}
	if r, ok := CommandLineOnly("config"); !ok || r == "" {
		t.Errorf("CommandLineOnly(config) = %q, %v", r, ok)
	}
	if _, ok := CommandLineOnly("eviction-hard"); ok {
		t.Error("CommandLineOnly(eviction-hard) is true")
	}
}

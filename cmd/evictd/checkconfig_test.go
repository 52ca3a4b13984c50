package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/internal/testing/hosttree"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/signals/host"
)

// fleet is a node's capacities given by flags, so that no test reads this
// machine's.
var fleet = []string{"check-config", "--hostname-override=n1", "--node-memory=16Gi", "--node-disk=100Gi", "--node-inodes=6553600", "--node-pids=4194304"}

// decodeDoc decodes check-config's JSON strictly: a field the document
// does not declare is an error.
func decodeDoc(t *testing.T, out string) configDoc {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	var doc configDoc
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("stdout is not check-config's JSON document: %v\n%s", err, out)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON document:\n%s", out)
	}
	return doc
}

func setting(t *testing.T, doc configDoc, name string) settingDoc {
	t.Helper()
	for _, s := range doc.Settings {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no setting %q in the document", name)
	return settingDoc{}
}

// TestSettingsCoverEveryFlag: the document has a setting for each of the
// agent's flags, and every other setting says what it is derived from.
func TestSettingsCoverEveryFlag(t *testing.T) {
	fs, opts := config.NewFlagSet("evictd")
	if err := fs.Parse([]string{"--hostname-override=n1"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := opts.Complete(fs)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]settingDoc{}
	for _, s := range effectiveSettings(cfg) {
		if _, dup := got[s.Name]; dup {
			t.Errorf("setting %q listed twice", s.Name)
		}
		got[s.Name] = s
	}
	flags := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) {
		flags[f.Name] = true
		if _, ok := got[f.Name]; !ok {
			t.Errorf("flag --%s has no setting in check-config's document", f.Name)
		}
	})
	for name, s := range got {
		if !flags[name] && len(s.DerivedFrom) == 0 {
			t.Errorf("setting %q is no flag and says nothing of what it is derived from", name)
		}
	}
}

// TestCheckConfigJSON: -o json prints one document, decoded back here:
// settings sorted by name with their effective values, the thresholds
// with the derived ones and their quantities against the capacities
// given, the capacities, and nothing else on stdout; notes on stderr.
func TestCheckConfigJSON(t *testing.T) {
	out, errOut, code := runCmd(append(fleet, "-o", "json", "--lease-duration=3m", "--eviction-hard=memory.available<1Gi,nodefs.available<10%,memory.pressure.full.avg10>20",
		"--system-reserved=memory=1Gi", "--eviction-soft=nodefs.available<20%", "--eviction-soft-grace-period=nodefs.available=2m")...)
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
	}
	doc := decodeDoc(t, out)
	if !slices.IsSortedFunc(doc.Settings, func(a, b settingDoc) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("settings are not sorted by name")
	}
	for _, tc := range []struct {
		name string
		want any // as JSON decodes into any
	}{
		{"lease-duration", "3m0s"},
		{"cgroup-driver", "cgroupfs"},
		{"hostname-override", "n1"},
		{"eviction-hard", map[string]any{"memory.available": "1Gi", "memory.pressure.full.avg10": ">20", "nodefs.available": "10%"}},
		{"eviction-soft-grace-period", map[string]any{"nodefs.available": "2m"}},
		{"system-reserved-memory", float64(1 << 30)},
		{"max-observation-age", "20s"},
		{"enforce-node-allocatable", []any{"pods"}},
		{"impersonate-node", true},
	} {
		s := setting(t, doc, tc.name)
		gotJSON, _ := json.Marshal(s.Value)
		wantJSON, _ := json.Marshal(tc.want)
		if !bytes.Equal(gotJSON, wantJSON) {
			t.Errorf("setting %s: got %s, want %s", tc.name, gotJSON, wantJSON)
		}
	}
	if s := setting(t, doc, "max-observation-age"); !slices.Equal(s.DerivedFrom, []string{"housekeeping-interval"}) {
		t.Errorf("max-observation-age derived from %v, want housekeeping-interval", s.DerivedFrom)
	}

	want := map[string]struct {
		derived  bool
		quantity int64
	}{
		"memory.available/hard":            {false, 1 << 30},
		"allocatableMemory.available/hard": {true, 1 << 30},
		"nodefs.available/hard":            {false, 10 << 30},
		"nodefs.available/soft":            {false, 20 << 30},
		"containerfs.available/hard":       {true, 10 << 30},
		"containerfs.available/soft":       {true, 20 << 30},
	}
	for _, th := range doc.Thresholds {
		key := string(th.Signal) + "/" + th.Kind
		if th.Signal.Stall() {
			// A share of time: no quantity, no capacity.
			if th.Value != "20" || th.Operator != ">" || th.Quantity != nil {
				t.Errorf("stall threshold: %+v, want >20 without a quantity", th)
			}
			continue
		}
		w, ok := want[key]
		if !ok {
			t.Errorf("unexpected threshold %s: %+v", key, th)
			continue
		}
		delete(want, key)
		// A percentage is a float32: within a thousandth.
		if th.Derived != w.derived || th.Quantity == nil || *th.Quantity < w.quantity-w.quantity/1000 || *th.Quantity > w.quantity+w.quantity/1000 {
			t.Errorf("threshold %s: derived %v quantity %s, want %v and %d", key, th.Derived, fmtQuantity(th.Quantity), w.derived, w.quantity)
		}
		if th.Kind == "soft" && th.GracePeriod != "2m0s" {
			t.Errorf("threshold %s: grace period %q, want 2m0s", key, th.GracePeriod)
		}
	}
	for key := range want {
		t.Errorf("threshold %s missing", key)
	}

	caps := map[signals.Signal]capacityDoc{}
	for _, c := range doc.Capacity {
		caps[c.Signal] = c
	}
	if c := caps[signals.MemoryAvailable]; !c.Checked || c.Capacity == nil || *c.Capacity != 16<<30 || c.From != "--node-memory" {
		t.Errorf("memory.available capacity: %+v, want 16Gi checked from --node-memory", c)
	}
	if c := caps[signals.AllocatableMemoryAvailable]; !c.Checked || *c.Capacity != 15<<30 {
		t.Errorf("allocatableMemory.available capacity: %+v, want 15Gi (16Gi less 1Gi reserved)", c)
	}
	if strings.Contains(out, "note: ") || strings.Contains(out, "warning: ") {
		t.Errorf("stdout carries notes or warnings:\n%s", out)
	}
}

// TestCheckConfigYAML: -o yaml is the same document.
func TestCheckConfigYAML(t *testing.T) {
	jsonOut, _, code := runCmd(append(fleet, "-o", "json")...)
	if code != 0 {
		t.Fatalf("json: exit %d", code)
	}
	yamlOut, errOut, code := runCmd(append(fleet, "-o", "yaml")...)
	if code != 0 {
		t.Fatalf("yaml: exit %d\n%s", code, errOut)
	}
	fromYAML, err := yaml.YAMLToJSON([]byte(yamlOut))
	if err != nil {
		t.Fatalf("stdout is not YAML: %v\n%s", err, yamlOut)
	}
	a, b := decodeDoc(t, jsonOut), decodeDoc(t, string(fromYAML))
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Errorf("the YAML document differs from the JSON one:\n%s\n%s", ja, jb)
	}
	again, _, _ := runCmd(append(fleet, "-o", "yaml")...)
	if again != yamlOut {
		t.Errorf("two runs printed different YAML")
	}
}

// TestCheckConfigCapacityNotChecked: a signal whose capacity no flag
// gives is said not to be checked, in the text and in the JSON, never
// left out; this machine's capacities are not used once a --node-* flag
// is given.
func TestCheckConfigCapacityNotChecked(t *testing.T) {
	args := []string{"check-config", "--hostname-override=n1", "--node-memory=16Gi", "--eviction-hard=memory.available<1Gi,nodefs.available<10%,pid.available<1000"}
	out, errOut, code := runCmd(append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	doc := decodeDoc(t, out)
	got := map[signals.Signal]capacityDoc{}
	for _, c := range doc.Capacity {
		got[c.Signal] = c
	}
	for _, s := range []signals.Signal{signals.NodeFsAvailable, signals.ContainerFsAvailable, signals.PIDAvailable} {
		c, ok := got[s]
		if !ok || c.Checked || c.Capacity != nil || !strings.Contains(c.Reason, "not given") {
			t.Errorf("%s: %+v, want listed as not checked, with the flag not given", s, c)
		}
	}
	if c := got[signals.MemoryAvailable]; !c.Checked {
		t.Errorf("memory.available: %+v, want checked", c)
	}
	text, _, _ := runCmd(args...)
	for _, want := range []string{
		"nodefs.available: capacity not checked: --node-disk not given",
		"pid.available: capacity not checked: --node-pids not given",
		"memory.available: 16Gi (--node-memory)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
}

// TestCheckConfigFleetSetAside: a threshold beyond the capacity given
// fails as it would on that node, naming it, with the error in the JSON.
func TestCheckConfigFleetSetAside(t *testing.T) {
	out, errOut, code := runCmd(append(fleet[:1:1], "--hostname-override=n1", "--node-memory=8Gi", "--node-disk=100Gi", "-o", "json",
		"--eviction-hard=memory.available<10Gi,nodefs.available<1%", "--enforce-node-allocatable=none")...)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstderr:\n%s", code, errOut)
	}
	doc := decodeDoc(t, out)
	const want = "threshold memory.available<10Gi is 10Gi, at or above the capacity of memory.available on this node (8Gi)"
	if len(doc.Errors) != 1 || !strings.Contains(doc.Errors[0], want) {
		t.Errorf("errors %q, want one with %q", doc.Errors, want)
	}
	if !strings.Contains(errOut, "1 threshold(s) cannot hold on the node given") {
		t.Errorf("stderr lacks the summary:\n%s", errOut)
	}
}

// TestCheckConfigStrict: a warning fails with --strict, exit 3, and not
// without; an error stays exit 1 with --strict.
func TestCheckConfigStrict(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no warning", []string{"--strict"}, 0, ""},
		{"a warning", []string{"--eviction-pressure-transition-period=0s"}, 0, "warning: --eviction-pressure-transition-period is 0s"},
		{"a warning, strict", []string{"--strict", "--eviction-pressure-transition-period=0s"}, exitStrictWarnings, "--strict: 1 warning(s)"},
		{"an error beats strict", []string{"--strict", "--eviction-pressure-transition-period=0s", "--eviction-hard=memory.available<20Gi,nodefs.available<1%", "--enforce-node-allocatable=none"}, 1,
			"1 threshold(s) cannot hold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCmd(append(fleet, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, want %d with %q\nstderr:\n%s", code, tc.code, tc.want, errOut)
			}
			if !strings.Contains(out, "SIGNAL") {
				t.Errorf("stdout lacks the document:\n%s", out)
			}
		})
	}
}

// TestCheckConfigBadFlags: check-config's own flags are usage errors that
// name the flag and the value.
func TestCheckConfigBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "xml"}, `-o: invalid value "xml": want text, json or yaml`},
		{[]string{"--node-memory", "lots"}, `--node-memory: invalid value "lots": want a quantity of bytes such as 16Gi, above 0`},
		{[]string{"--node-disk", "-1Gi"}, `--node-disk: invalid value "-1Gi"`},
		{[]string{"--node-pids", "0"}, `--node-pids: invalid value "0"`},
	} {
		out, errOut, code := runCmd(append([]string{"check-config", "--hostname-override=n1"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("check-config %v: exit %d, stderr %q, stdout %q; want exit 2, %q and no document", tc.args, code, errOut, out, tc.want)
		}
	}
}

// TestSuspicious: values internal/config accepts but that look wrong.
func TestSuspicious(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		warning  string // "" for none
		note     string
		noteless bool
	}{
		{name: "defaults", args: nil, noteless: true},
		{name: "transition 0", args: []string{"--eviction-pressure-transition-period=0s"}, warning: "is 0s: a pressure condition and its taint clear"},
		{name: "transition below the interval", args: []string{"--eviction-pressure-transition-period=5s"}, warning: "(5s) is shorter than --housekeeping-interval (10s)"},
		{name: "transition over an hour", args: []string{"--eviction-pressure-transition-period=2h"}, warning: "(2h0m0s) is over 1h0m0s"},
		{name: "max pod grace without soft", args: []string{"--eviction-max-pod-grace-period=30"}, note: "(30) has no effect: no soft threshold"},
		{name: "max pod grace negative with soft", args: []string{"--eviction-max-pod-grace-period=-1", "--eviction-soft=memory.available<1Gi", "--eviction-soft-grace-period=memory.available=1m"},
			warning: "is -1: a soft eviction waits for the pod's own terminationGracePeriodSeconds"},
		{name: "max pod grace long with soft", args: []string{"--eviction-max-pod-grace-period=600", "--eviction-soft=memory.available<1Gi", "--eviction-soft-grace-period=memory.available=1m"},
			warning: "is 600s: a soft eviction may leave the node under pressure"},
		{name: "endpoint with a query", args: []string{"--container-runtime-endpoint=unix:///run/containerd/containerd.sock?x=1"}, warning: "a query or fragment is no part of a socket path"},
		{name: "endpoint not a socket", args: []string{"--container-runtime-endpoint=unix:///run/containerd/containerd"}, warning: "does not end in .sock"},
		{name: "image endpoint unclean", args: []string{"--image-service-endpoint=unix:///run//crio/crio.sock"}, warning: "the path is not clean (/run/crio/crio.sock)"},
		{name: "node name localhost", args: []string{"--hostname-override=localhost"}, warning: `node name "localhost", from --hostname-override`},
		{name: "node name too long for the Lease", args: []string{"--hostname-override=" + strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)},
			warning: "the agent cannot create its Lease"},
		{name: "long lease", args: []string{"--lease-duration=1h"}, warning: "(1h0m0s) is over 10m0s: a stopped evictd still looks alive"},
		{name: "lease elsewhere", args: []string{"--lease-namespace=evictd"}, note: "bind its Role evictd-lease in evictd"},
		{name: "no eviction cap", args: []string{"--max-evictions-per-hour=0"}, warning: "is 0: no cap on evictions"},
		{name: "burst over the cap", args: []string{"--max-evictions-per-hour=3", "--local-storage-eviction-burst=5"}, warning: "(5) is above --max-evictions-per-hour (3)"},
		{name: "no local-storage rate", args: []string{"--local-storage-eviction-qps=0"}, note: "every pod over its own local-storage limit is evicted in one pass"},
		{name: "dry run", args: []string{"--dry-run"}, note: "--dry-run is set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, opts := config.NewFlagSet("evictd")
			args := append([]string{"--hostname-override=n1"}, tc.args...)
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			cfg, err := opts.Complete(fs)
			if err != nil {
				t.Fatalf("the configuration is refused: %v", err)
			}
			warnings, notes := suspicious(cfg)
			switch {
			case tc.warning == "" && len(warnings) > 0:
				t.Errorf("got warnings %q, want none", warnings)
			case tc.warning != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], tc.warning)):
				t.Errorf("got warnings %q, want one with %q", warnings, tc.warning)
			}
			if tc.note != "" && !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, tc.note) }) {
				t.Errorf("got notes %q, want one with %q", notes, tc.note)
			}
			if tc.noteless && len(notes) > 0 {
				t.Errorf("got notes %q, want none", notes)
			}
		})
	}
}

// TestKubepodsDriver: --cgroup-driver against fixture trees, cgroup v1
// (hosttree's cgroupfs kubepods) and v2 (a systemd kubepods.slice).
func TestKubepodsDriver(t *testing.T) {
	dir := t.TempDir()
	v1, err := hosttree.Write(filepath.Join(dir, "v1"), hosttree.Node{MemTotal: 8 << 30, NoPSI: true})
	if err != nil {
		t.Fatal(err)
	}
	v2 := filepath.Join(dir, "v2")
	for p, content := range map[string]string{
		filepath.Join(v2, "cgroup.controllers"):                   "cpu io memory pids\n",
		filepath.Join(v2, "kubepods.slice", "cgroup.controllers"): "cpu memory pids\n",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	empty := filepath.Join(dir, "empty")
	if err := os.MkdirAll(filepath.Join(empty, "memory"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(empty, "memory", "memory.usage_in_bytes"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, mount, driver string
		status              checkStatus
		want                string
	}{
		{"v1 cgroupfs", v1.Cgroup, "cgroupfs", statusOK, filepath.Join(v1.Cgroup, "memory", "kubepods") + " exists"},
		{"v1 systemd, wrong", v1.Cgroup, "systemd", statusFail, "the kubelet uses the cgroupfs driver; set --cgroup-driver=cgroupfs"},
		{"v2 systemd", v2, "systemd", statusOK, filepath.Join(v2, "kubepods.slice") + " exists"},
		{"v2 cgroupfs, wrong", v2, "cgroupfs", statusFail, "the kubelet uses the systemd driver; set --cgroup-driver=systemd"},
		{"no kubepods", empty, "cgroupfs", statusWarn, "no kubelet has made the pods' cgroup yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := findKubepods(hostConfigFor(tc.mount, tc.driver))
			if err != nil {
				t.Fatal(err)
			}
			status, msg := f.verdict()
			if status != tc.status || !strings.Contains(msg, tc.want) {
				t.Errorf("got %s %q, want %s with %q", status, msg, tc.status, tc.want)
			}
		})
	}
	t.Run("check-config warns of the wrong driver", func(t *testing.T) {
		_, errOut, code := runCmd("check-config", "--hostname-override=n1", "--proc-root="+v1.Proc, "--cgroup-mount="+v1.Cgroup, "--root-dir="+dir, "--cgroup-driver=systemd", "--strict")
		if code != exitStrictWarnings || !strings.Contains(errOut, "warning: --cgroup-driver=systemd names") {
			t.Errorf("exit %d, want %d and the driver's warning\nstderr:\n%s", code, exitStrictWarnings, errOut)
		}
	})
}

func TestEndpointWarning(t *testing.T) {
	for _, tc := range []struct{ ep, want string }{
		{"unix:///run/containerd/containerd.sock", ""},
		{"unix:///var/run/crio/crio.sock", ""},
		{"unix:///run/containerd/containerd.sock#x", "query or fragment"},
		{"unix:///run/containerd/containerd.sock?", "query or fragment"},
		{"unix:///run/../run/containerd.sock", "not clean"},
		{"unix:///run/containerd", "does not end in .sock"},
	} {
		got := endpointWarning(tc.ep)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("endpointWarning(%q) = %q, want %q", tc.ep, got, tc.want)
		}
	}
}

// hostConfigFor is a host configuration for a cgroup mount and driver.
func hostConfigFor(mount, driver string) host.Config {
	return host.Config{ProcRoot: "/proc", CgroupMount: mount, CgroupRoot: "/", CgroupDriver: driver, KubeletRootDir: "/var/lib/kubelet"}
}

func fmtQuantity(q *int64) string {
	if q == nil {
		return "none"
	}
	return strconv.FormatInt(*q, 10)
}

func TestSettingText(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"eviction-hard", map[string]string{"nodefs.available": "10%", "memory.available": "100Mi", "memory.pressure.full.avg10": ">20"},
			"memory.available<100Mi,memory.pressure.full.avg10>20,nodefs.available<10%"},
		{"eviction-soft-grace-period", map[string]string{"memory.available": "1m"}, "memory.available=1m"},
		{"feature-gates", map[string]bool{"HugepageAwareEviction": false}, "HugepageAwareEviction=false"},
		{"enforce-node-allocatable", []string{"pods", "kube-reserved"}, "pods,kube-reserved"},
		{"imagefs-path", "", `""`},
		{"flight-records", 200, "200"},
	} {
		if got := settingText(tc.name, tc.v); got != tc.want {
			t.Errorf("settingText(%s, %v) = %q, want %q", tc.name, tc.v, got, tc.want)
		}
	}
}

// TestCheckConfigDriverRoot: a cgroup root the systemd driver cannot name
// is the agent's refusal to start, exit 1, with no document.
func TestCheckConfigDriverRoot(t *testing.T) {
	out, errOut, code := runCmd(append(fleet, "--cgroup-driver=systemd", "--cgroup-root=/kube")...)
	const want = `the agent would refuse to start: invalid configuration: CgroupRoot (--cgroup-root) "/kube": with the systemd driver it must be "/" or a slice ending in .slice`
	if code != 1 || !strings.Contains(errOut, want) || out != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and %q", code, out, errOut, want)
	}
}

package config

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestGateMap(t *testing.T) {
	var m map[string]bool
	g := &gateMap{m: &m}
	for _, tc := range []struct {
		value   string
		want    map[string]bool
		wantErr string
	}{
		// The first Set replaces, later ones add, as the kubelet's
		// MapStringBool; ParseBool's spellings are accepted.
		{value: "HugepageAwareEviction=false", want: map[string]bool{"HugepageAwareEviction": false}},
		{value: " KubeletPSI = 1 ,, MemoryQoS=F", want: map[string]bool{"HugepageAwareEviction": false, "KubeletPSI": true, "MemoryQoS": false}},
		{value: "HugepageAwareEviction", wantErr: `malformed pair "HugepageAwareEviction": want name=true or name=false`},
		{value: "=true", wantErr: `malformed pair "=true"`},
		// The kubelet skips an empty entry, not a blank one.
		{value: "KubeletPSI=true, ", wantErr: `malformed pair " ": want name=true or name=false`},
		{value: "KubeletPSI=", wantErr: `malformed pair "KubeletPSI=": empty value after "="`},
		{value: "HugepageAwareEviction=off", wantErr: `invalid value of HugepageAwareEviction: "off" is not true or false`},
	} {
		err := g.Set(tc.value)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Set(%q): got %v, want an error holding %q", tc.value, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(m, tc.want) {
			t.Errorf("Set(%q): got %v, %v, want %v", tc.value, m, err, tc.want)
		}
	}
	if got, want := g.String(), "HugepageAwareEviction=false,KubeletPSI=true,MemoryQoS=false"; got != want {
		t.Errorf("String: got %q, want %q", got, want)
	}
	if got := g.Type(); got != "mapStringBool" {
		t.Errorf("Type: got %q", got)
	}
}

// TestHugepageAwareEvictionGate: where HugepageAwareEviction comes from,
// gate by gate as the kubelet merges --feature-gates over featureGates
// (cmd/kubelet/app/server.go, kubeletConfigFlagPrecedence).
func TestHugepageAwareEvictionGate(t *testing.T) {
	dir := t.TempDir()
	off := filepath.Join(dir, "off.yaml")
	on := filepath.Join(dir, "on.yaml")
	other := filepath.Join(dir, "other.yaml")
	node := filepath.Join(dir, "node-config.yaml")
	nodeOn := filepath.Join(dir, "node-config-on.yaml")
	writeFiles(t, dir, map[string]string{
		"off.yaml":            kubeletHeader + "featureGates:\n  HugepageAwareEviction: false\n  KubeletPSI: true\n",
		"on.yaml":             kubeletHeader + "featureGates:\n  HugepageAwareEviction: true\n",
		"other.yaml":          kubeletHeader + "featureGates:\n  MemoryQoS: true\n",
		"node-config.yaml":    "kubeletArguments:\n  feature-gates: [\"HugepageAwareEviction=false\", \"KubeletPSI=true\"]\n",
		"node-config-on.yaml": "kubeletArguments:\n  feature-gates: [\"HugepageAwareEviction=true\"]\n",
	})
	for _, tc := range []struct {
		name      string
		args      []string
		want      bool
		wantFrom  string // Sources["feature-gates"]
		wantNotes []string
	}{
		{name: "default: kubelet 1.37's", want: true},
		{name: "the flag turns it off", args: []string{"--feature-gates=HugepageAwareEviction=false"}, wantFrom: "--feature-gates"},
		{name: "the flag, twice, adds", args: []string{"--feature-gates=HugepageAwareEviction=false", "--feature-gates=KubeletPSI=true"},
			wantFrom: "--feature-gates", wantNotes: []string{"--feature-gates: ignored KubeletPSI: evictd reads only the feature gate HugepageAwareEviction, the others are the kubelet's."}},
		{name: "other gates leave the default", args: []string{"--feature-gates=KubeletPSI=true,MemoryQoS=false"}, want: true,
			wantNotes: []string{"--feature-gates: ignored KubeletPSI, MemoryQoS: evictd reads only the feature gate HugepageAwareEviction, the others are the kubelet's."}},
		{name: "featureGates in --config", args: []string{"--config=" + off}, wantFrom: "featureGates in " + off,
			wantNotes: []string{"featureGates in " + off + ": ignored KubeletPSI: evictd reads only the feature gate HugepageAwareEviction, the others are the kubelet's."}},
		{name: "the flag overrides the file's gate", args: []string{"--config=" + off, "--feature-gates=HugepageAwareEviction=true"}, want: true,
			wantFrom: "--feature-gates", wantNotes: []string{
				"featureGates in " + off + ": ignored KubeletPSI: evictd reads only the feature gate HugepageAwareEviction, the others are the kubelet's.",
				"featureGates in " + off + " for HugepageAwareEviction is overridden by --feature-gates.",
				// --config is also taken for the kubelet's own file.
				"the kubelet's featureGates in " + off + " set HugepageAwareEviction=false but evictd's is true (--feature-gates): on a node with hugepages the kubelet's memory.available and evictd's differ by the hugepage capacity; give evictd --feature-gates=HugepageAwareEviction=false to compute it as this kubelet does.",
			}},
		// The kubelet keeps the file's gates the flag does not name.
		{name: "a flag without the gate keeps the file's", args: []string{"--config=" + off, "--feature-gates=MemoryQoS=true"},
			wantFrom: "featureGates in " + off, wantNotes: []string{
				"--feature-gates: ignored MemoryQoS: evictd reads only the feature gate HugepageAwareEviction, the others are the kubelet's.",
				"featureGates in " + off + ": ignored KubeletPSI: evictd reads only the feature gate HugepageAwareEviction, the others are the kubelet's.",
			}},
		{name: "a file without the gate", args: []string{"--config=" + other}, want: true,
			wantNotes: []string{"featureGates in " + other + ": ignored MemoryQoS: evictd reads only the feature gate HugepageAwareEviction, the others are the kubelet's."}},
		{name: "kubeletArguments.feature-gates", args: []string{"--node-config=" + node}, wantFrom: "kubeletArguments.feature-gates in " + node,
			wantNotes: []string{"kubeletArguments.feature-gates in " + node + ": ignored KubeletPSI: evictd reads only the feature gate HugepageAwareEviction, the others are the kubelet's."}},
		{name: "--config over --node-config", args: []string{"--node-config=" + nodeOn, "--config=" + off}, wantFrom: "featureGates in " + off,
			wantNotes: []string{
				"featureGates in " + off + ": ignored KubeletPSI: evictd reads only the feature gate HugepageAwareEviction, the others are the kubelet's.",
				"kubeletArguments.feature-gates in " + nodeOn + " for HugepageAwareEviction is overridden by featureGates in " + off + ".",
			}},
		{name: "on, said so", args: []string{"--config=" + on}, want: true, wantFrom: "featureGates in " + on},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := complete(tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if c.HugepageAwareEviction != tc.want || c.Sources["feature-gates"] != tc.wantFrom {
				t.Errorf("got %v from %q, want %v from %q", c.HugepageAwareEviction, c.Sources["feature-gates"], tc.want, tc.wantFrom)
			}
			var notes []string
			for _, n := range c.Notes {
				if strings.Contains(n, "the feature gate") || strings.Contains(n, " for HugepageAwareEviction is overridden") || strings.HasPrefix(n, "the kubelet's featureGates") {
					notes = append(notes, n)
				}
			}
			if !reflect.DeepEqual(notes, tc.wantNotes) {
				t.Errorf("notes:\n got %q\nwant %q", notes, tc.wantNotes)
			}
			sem := c.MemoryAvailableSemantics()
			wantSem := "memory.available is kubelet 1.36's (HugepageAwareEviction=false, from " + tc.wantFrom + "): MemTotal minus the root cgroup's working set; the node's hugepage capacity is not subtracted."
			switch {
			case tc.want && tc.wantFrom == "":
				wantSem = "memory.available is kubelet 1.37's (HugepageAwareEviction on, the default as in kubelet 1.37; --feature-gates=HugepageAwareEviction=false for kubelet 1.36's): MemTotal minus the node's hugepage capacity minus the root cgroup's working set."
			case tc.want:
				wantSem = "memory.available is kubelet 1.37's (HugepageAwareEviction=true, from " + tc.wantFrom + "): MemTotal minus the node's hugepage capacity minus the root cgroup's working set."
			}
			if sem != wantSem {
				t.Errorf("semantics:\n got %q\nwant %q", sem, wantSem)
			}
		})
	}
}

func TestHugepageAwareEvictionGateErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"not-bool.yaml":    kubeletHeader + "featureGates:\n  HugepageAwareEviction: \"no\"\n",
		"wrong-case.yaml":  kubeletHeader + "featureGates:\n  hugepageAwareEviction: false\n",
		"not-map.yaml":     kubeletHeader + "featureGates: HugepageAwareEviction=false\n",
		"node-pair.yaml":   "kubeletArguments:\n  feature-gates: [\"HugepageAwareEviction\"]\n",
		"node-scalar.yaml": "kubeletArguments:\n  feature-gates: HugepageAwareEviction=false\n",
	})
	in := func(name string) string { return filepath.Join(dir, name) }
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--feature-gates=hugepageawareeviction=false"},
			[]string{`--feature-gates: unrecognized feature gate "hugepageawareeviction": feature gate names are case-sensitive, did you mean HugepageAwareEviction?`}},
		{[]string{"--config=" + in("not-bool.yaml")}, []string{in("not-bool.yaml"), "featureGates", `"no"`}},
		{[]string{"--config=" + in("wrong-case.yaml")}, []string{"featureGates in " + in("wrong-case.yaml"), `unrecognized feature gate "hugepageAwareEviction"`}},
		{[]string{"--config=" + in("not-map.yaml")}, []string{in("not-map.yaml"), "featureGates", "HugepageAwareEviction=false"}},
		{[]string{"--node-config=" + in("node-pair.yaml")},
			[]string{"kubeletArguments.feature-gates", `invalid value "HugepageAwareEviction"`, `malformed pair "HugepageAwareEviction"`}},
		{[]string{"--node-config=" + in("node-scalar.yaml")}, []string{"kubeletArguments.feature-gates", "is not a list of strings"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			c, err := complete(tc.args...)
			if err == nil {
				t.Fatalf("got %v, want an error", c.HugepageAwareEviction)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got error %q, want it to hold %q", err, w)
				}
			}
		})
	}
	// A bad value on the command line is a flag error, before Complete.
	fs, _ := NewFlagSet("evictd")
	err := fs.Parse([]string{"--feature-gates=HugepageAwareEviction=maybe"})
	if err == nil || !strings.Contains(err.Error(), `invalid value of HugepageAwareEviction: "maybe" is not true or false`) {
		t.Errorf("got %v, want the flag error", err)
	}
}

// TestKubeletGateDiffers: the kubelet's own configuration (--kubelet-config,
// its drop-ins) setting HugepageAwareEviction otherwise than evictd gets a
// note; the same setting gets none.
func TestKubeletGateDiffers(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"kubelet.yaml":         kubeletHeader + "featureGates:\n  HugepageAwareEviction: false\n",
		"dropins/10-huge.conf": kubeletHeader + "featureGates:\n  HugepageAwareEviction: true\n",
	})
	kubelet := filepath.Join(dir, "kubelet.yaml")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"evictd's default against the kubelet's false", []string{"--kubelet-config=" + kubelet},
			"the kubelet's featureGates in " + kubelet + " set HugepageAwareEviction=false but evictd's is true (the default): on a node with hugepages the kubelet's memory.available and evictd's differ by the hugepage capacity; give evictd --feature-gates=HugepageAwareEviction=false to compute it as this kubelet does."},
		{"the same", []string{"--kubelet-config=" + kubelet, "--feature-gates=HugepageAwareEviction=false"}, ""},
		{"evictd reads the kubelet's file", []string{"--config=" + kubelet}, ""},
		{"a drop-in turns the kubelet's back on", []string{"--kubelet-config=" + kubelet, "--kubelet-config-dir=" + filepath.Join(dir, "dropins"),
			"--feature-gates=HugepageAwareEviction=false"},
			"the kubelet's featureGates in " + kubelet + " + " + filepath.Join(dir, "dropins", "10-huge.conf") + " set HugepageAwareEviction=true but evictd's is false (--feature-gates)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := complete(tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			for _, n := range c.Notes {
				if strings.HasPrefix(n, "the kubelet's featureGates") {
					got = n
				}
			}
			if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
				t.Errorf("note:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

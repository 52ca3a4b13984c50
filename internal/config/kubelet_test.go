package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

func TestKubeletRaces(t *testing.T) {
	no, yes := false, true
	i32 := func(v int32) *int32 { return &v }
	quiet := kubeletv1beta1.KubeletConfiguration{
		EvictionHard:                  map[string]string{"memory.available": "0%", "nodefs.available": "100%", "imagefs.available": "0%", "nodefs.inodesFree": "0%", "imagefs.inodesFree": "0%"},
		LocalStorageCapacityIsolation: &no,
		ImageGCHighThresholdPercent:   i32(100),
	}
	with := func(f func(*kubeletv1beta1.KubeletConfiguration)) kubeletv1beta1.KubeletConfiguration {
		kc := quiet
		f(&kc)
		return kc
	}
	for _, tc := range []struct {
		name string
		kc   kubeletv1beta1.KubeletConfiguration
		// want: per race, its kind and parts of its warning.
		want [][]string
	}{
		{"every signal disabled, no local storage, no image GC", quiet, nil},
		{"the kubelet's defaults", kubeletv1beta1.KubeletConfiguration{}, [][]string{
			{RaceThreshold, "evictionHard in F still has imagefs.available<15%, imagefs.inodesFree<5%, memory.available<100Mi, nodefs.available<10%, nodefs.inodesFree<5% (the kubelet's defaults: evictionHard is not set)",
				`set evictionHard: {imagefs.available: "0%", imagefs.inodesFree: "0%", memory.available: "0%", nodefs.available: "0%", nodefs.inodesFree: "0%"}`},
			{RaceLocalStorage, "localStorageCapacityIsolation in F is true (the default)", "pods that request ephemeral storage no longer schedule on the node"},
			{RaceImageGC, "imageGCHighThresholdPercent in F is 85 (the default)", "over 85% full, down to 80%", "set imageGCHighThresholdPercent: 100"},
		}},
		{"one hard threshold left", with(func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.EvictionHard = map[string]string{"memory.available": "200Mi", "nodefs.available": "0%"}
		}), [][]string{{RaceThreshold, "evictionHard in F still has memory.available<200Mi:", `{memory.available: "0%"}`}}},
		{"a partial map with mergeDefaultEvictionSettings keeps the defaults", with(func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.EvictionHard = map[string]string{"memory.available": "0%"}
			kc.MergeDefaultEvictionSettings = &yes
		}), [][]string{{RaceThreshold, "still has imagefs.available<15%, imagefs.inodesFree<5%, nodefs.available<10%, nodefs.inodesFree<5%:"}}},
		{"a soft threshold", with(func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.EvictionSoft = map[string]string{"memory.available": "1Gi", "nodefs.available": "0%"}
		}), [][]string{{RaceThreshold, "evictionSoft in F still has memory.available<1Gi:", `set evictionSoft: {memory.available: "0%"}`}}},
		{"local storage set true", with(func(kc *kubeletv1beta1.KubeletConfiguration) { kc.LocalStorageCapacityIsolation = &yes }),
			[][]string{{RaceLocalStorage, "localStorageCapacityIsolation in F is true:"}}},
		{"image GC at 90/70", with(func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ImageGCHighThresholdPercent, kc.ImageGCLowThresholdPercent = i32(90), i32(70)
		}), [][]string{{RaceImageGC, "imageGCHighThresholdPercent in F is 90:", "over 90% full, down to 70%"}}},
		{"image GC by age", with(func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ImageMaximumGCAge = metav1.Duration{Duration: 24 * time.Hour}
		}), [][]string{{RaceImageGC, "imageMaximumGCAge in F is 24h0m0s", "imageMaximumGCAge: 0s"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := kubeletRaces(&tc.kc, "F")
			if len(got) != len(tc.want) {
				t.Fatalf("got %d races %v, want %d", len(got), got, len(tc.want))
			}
			for i, w := range tc.want {
				if got[i].Kind != w[0] {
					t.Errorf("race %d: got kind %q, want %q", i, got[i].Kind, w[0])
				}
				for _, part := range w[1:] {
					if !strings.Contains(got[i].Warning, part) {
						t.Errorf("race %d: got %q, want it to contain %q", i, got[i].Warning, part)
					}
				}
			}
		})
	}
}

const kubeletHeader = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMergeKubeletDropins(t *testing.T) {
	for _, tc := range []struct {
		name    string
		main    string // "" for no main file
		dropins map[string]string
		want    map[string]string
		wantLSI *bool
		wantGC  *int32
		skipped int
		files   int
	}{
		{"no drop-ins: the main file with the default thresholds", kubeletHeader, nil,
			map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%", "imagefs.inodesFree": "5%"}, nil, nil, 0, 1},
		{"a drop-in's map merges key by key over the defaults", kubeletHeader, map[string]string{
			"10-mem.conf": kubeletHeader + "evictionHard:\n  memory.available: \"0%\"\n",
		}, map[string]string{"memory.available": "0%", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%", "imagefs.inodesFree": "5%"}, nil, nil, 0, 2},
		{"later files win, in lexical order, subdirectories too; other files skipped",
			kubeletHeader + "evictionHard:\n  memory.available: 1Gi\nimageGCHighThresholdPercent: 90\n", map[string]string{
				"20-b.conf":      kubeletHeader + "evictionHard:\n  memory.available: 2Gi\nlocalStorageCapacityIsolation: false\n",
				"10-a.conf":      kubeletHeader + "evictionHard:\n  memory.available: 3Gi\n  nodefs.available: \"0%\"\nlocalStorageCapacityIsolation: true\n",
				"30-c/x.conf":    kubeletHeader + "imageGCHighThresholdPercent: 100\n",
				"README":         "not a config",
				"40-d.conf.orig": "not a config either",
			}, map[string]string{"memory.available": "2Gi", "nodefs.available": "0%"}, new(false), new(int32(100)), 2, 4},
		{"a drop-in's null removes a key", kubeletHeader + "evictionHard:\n  memory.available: 1Gi\n  nodefs.available: 5%\n", map[string]string{
			"10.conf": kubeletHeader + "evictionHard:\n  nodefs.available: null\n",
		}, map[string]string{"memory.available": "1Gi"}, nil, nil, 0, 2},
		{"no main file: drop-ins over the defaults", "", map[string]string{
			"10.conf": kubeletHeader + "evictionHard:\n  imagefs.available: \"0%\"\n",
		}, map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "0%", "imagefs.inodesFree": "5%"}, nil, nil, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var base *kubeletConfigFile
			if tc.main != "" {
				writeFiles(t, dir, map[string]string{"kubelet.yaml": tc.main})
				var err error
				if base, err = readKubeletConfigFlag(filepath.Join(dir, "kubelet.yaml"), "--import-kubelet-config"); err != nil {
					t.Fatal(err)
				}
			}
			dropDir := ""
			if tc.dropins != nil {
				dropDir = filepath.Join(dir, "kubelet.conf.d")
				writeFiles(t, dropDir, tc.dropins)
			}
			m, err := mergeKubeletDropins(base, dropDir)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(m.kc.EvictionHard, tc.want) {
				t.Errorf("evictionHard: got %v, want %v", m.kc.EvictionHard, tc.want)
			}
			if !reflect.DeepEqual(m.kc.LocalStorageCapacityIsolation, tc.wantLSI) {
				t.Errorf("localStorageCapacityIsolation: got %v, want %v", m.kc.LocalStorageCapacityIsolation, tc.wantLSI)
			}
			if !reflect.DeepEqual(m.kc.ImageGCHighThresholdPercent, tc.wantGC) {
				t.Errorf("imageGCHighThresholdPercent: got %v, want %v", m.kc.ImageGCHighThresholdPercent, tc.wantGC)
			}
			if len(m.skipped) != tc.skipped || len(m.files) != tc.files {
				t.Errorf("got files %v, skipped %v; want %d files, %d skipped", m.files, m.skipped, tc.files, tc.skipped)
			}
		})
	}
}

func TestCompleteKubeletConfig(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"kubelet.yaml":     kubeletHeader + "imageGCHighThresholdPercent: 100\nlocalStorageCapacityIsolation: false\n",
		"d/10-quiet.conf":  kubeletHeader + "evictionHard: {memory.available: \"0%\", nodefs.available: \"0%\", nodefs.inodesFree: \"0%\", imagefs.available: \"0%\", imagefs.inodesFree: \"0%\"}\n",
		"bad.yaml":         kubeletHeader + "evictionHard: 5\n",
		"future.yaml":      kubeletHeader + "someFieldFromKubelet138: true\nimageGCHighThresholdPercent: 100\n",
		"e/10-future.conf": kubeletHeader + "someFieldFromKubelet138: true\n",
	})
	kubelet, drop, future := filepath.Join(dir, "kubelet.yaml"), filepath.Join(dir, "d"), filepath.Join(dir, "future.yaml")
	for _, tc := range []struct {
		name        string
		args        []string
		wantKinds   []string
		wantChecked bool
		wantNote    string
		wantErr     string
		// wantLenient are the files decoded leniently, as flag:path.
		wantLenient []string
	}{
		{"nothing given: no check", nil, nil, false, "", "", nil},
		{"--kubelet-config alone: the default thresholds race", []string{"--kubelet-config", kubelet}, []string{RaceThreshold}, true, "", "", nil},
		{"--config stands for the kubelet's", []string{"--config", kubelet}, []string{RaceThreshold}, true, "--kubelet-config is not given", "", nil},
		{"with the drop-in nothing races", []string{"--kubelet-config", kubelet, "--kubelet-config-dir", drop}, nil, true, "", "", nil},
		{"--config's ignored fields are noted", []string{"--config", kubelet, "--kubelet-config-dir", drop}, nil, true,
			"sets imageGCHighThresholdPercent, localStorageCapacityIsolation, which bear on eviction but which evictd does not take from it", "", nil},
		{"the drop-in directory alone", []string{"--kubelet-config-dir", drop}, []string{RaceLocalStorage, RaceImageGC}, true, "", "", nil},
		{"the drop-in directory alone, local storage left to the kubelet: no race", []string{"--kubelet-config-dir", drop, "--local-storage-eviction", "kubelet"}, []string{RaceImageGC}, true,
			"pods over their own local-storage limits are left to the kubelet, whose localStorageCapacityIsolation in " + drop, "", nil},
		{"left to a kubelet whose is off: evictd evicts them", []string{"--kubelet-config", kubelet, "--local-storage-eviction", "kubelet"}, []string{RaceThreshold}, true,
			"evictd evicts the pods over their own local-storage limits although --local-storage-eviction=kubelet: the kubelet's localStorageCapacityIsolation in " + kubelet + " is off", "", nil},
		{"left to the kubelet, its configuration unknown: the node decides", []string{"--local-storage-eviction", "kubelet"}, nil, false, "while its node reports an ephemeral-storage capacity", "", nil},
		{"--config is not the kubelet's own: the node decides", []string{"--config", future, "--local-storage-eviction", "kubelet"}, []string{RaceThreshold}, true, "while its node reports an ephemeral-storage capacity", "",
			[]string{"--config:" + future}},
		{"an unknown agent", []string{"--local-storage-eviction", "both"}, nil, false, "", `--local-storage-eviction: invalid value "both"`, nil},
		{"bad file", []string{"--kubelet-config", filepath.Join(dir, "bad.yaml")}, nil, false, "", "bad.yaml: evictionHard: invalid value 5", nil},
		{"a newer kubelet's file", []string{"--kubelet-config", future}, []string{RaceThreshold, RaceLocalStorage}, true, "", "",
			[]string{"--kubelet-config:" + future}},
		{"a newer kubelet's file as --config and --kubelet-config: one warning", []string{"--config", future, "--kubelet-config", future}, []string{RaceThreshold, RaceLocalStorage}, true, "", "",
			[]string{"--config:" + future}},
		{"a newer kubelet's drop-in", []string{"--kubelet-config", kubelet, "--kubelet-config-dir", filepath.Join(dir, "e")}, []string{RaceThreshold}, true, "", "",
			[]string{"--kubelet-config-dir:" + filepath.Join(dir, "e", "10-future.conf")}},
		{"missing file", []string{"--kubelet-config", filepath.Join(dir, "none.yaml")}, nil, false, "", "read --kubelet-config file", nil},
		{"missing directory", []string{"--kubelet-config-dir", filepath.Join(dir, "none")}, nil, false, "", "read --kubelet-config-dir", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, o := NewFlagSet("evictd")
			o.hostname = func() (string, error) { return "n1", nil }
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			c, err := o.Complete(fs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, r := range c.KubeletRaces {
				kinds = append(kinds, r.Kind)
			}
			if !reflect.DeepEqual(kinds, tc.wantKinds) || c.KubeletChecked != tc.wantChecked {
				t.Errorf("got races %v (checked %v), want %v (%v)", kinds, c.KubeletChecked, tc.wantKinds, tc.wantChecked)
			}
			var lenient []string
			for _, l := range c.Lenient {
				lenient = append(lenient, l.Flag+":"+l.Path)
			}
			if !reflect.DeepEqual(lenient, tc.wantLenient) {
				t.Errorf("got lenient decodings %q, want %q", lenient, tc.wantLenient)
			}
			if len(c.Warnings) != len(c.KubeletRaces)+len(c.Lenient)+len(c.Deprecations) {
				t.Errorf("got warnings %q, want one per race, lenient decoding and deprecation", c.Warnings)
			}
			if tc.wantNote != "" && !strings.Contains(strings.Join(c.Notes, "\n"), tc.wantNote) {
				t.Errorf("notes %q lack %q", c.Notes, tc.wantNote)
			}
		})
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckConfigWarnsOfKubeletRaces(t *testing.T) {
	dir := t.TempDir()
	const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	kubelet, drop := filepath.Join(dir, "kubelet.yaml"), filepath.Join(dir, "kubelet.conf.d")
	if err := os.Mkdir(drop, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, text := range map[string]string{
		kubelet:                          header + "evictionHard:\n  memory.available: 200Mi\n",
		filepath.Join(drop, "10.conf"):   header + "localStorageCapacityIsolation: false\nimageGCHighThresholdPercent: 100\n",
		filepath.Join(dir, "broken.yml"): header + "evictionHard: [1]\n",
	} {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name     string
		args     []string
		want     []string
		dontWant []string
	}{
		{"the kubelet's file alone", []string{"--kubelet-config", kubelet}, []string{
			"warning: the kubelet's evictionHard in " + kubelet + " still has memory.available<200Mi: the kubelet evicts on them too, racing evictd; set evictionHard: {memory.available: \"0%\"}",
			"warning: the kubelet's localStorageCapacityIsolation in " + kubelet + " is true (the default)",
			"warning: the kubelet's imageGCHighThresholdPercent in " + kubelet + " is 85 (the default)",
		}, []string{"are left to the kubelet"}},
		{"local storage left to the kubelet", []string{"--kubelet-config", kubelet, "--local-storage-eviction", "kubelet"}, []string{
			"note: pods over their own local-storage limits are left to the kubelet, whose localStorageCapacityIsolation in " + kubelet + " is on (--local-storage-eviction=kubelet)",
		}, []string{"warning: the kubelet's localStorageCapacityIsolation"}},
		{"with its drop-ins", []string{"--kubelet-config", kubelet, "--kubelet-config-dir", drop}, []string{
			"warning: the kubelet's evictionHard in " + kubelet + " + " + filepath.Join(drop, "10.conf") + " still has memory.available<200Mi",
		}, []string{"localStorageCapacityIsolation", "imageGCHighThresholdPercent"}},
		{"--config stands for it", []string{"--config", kubelet}, []string{
			"note: --kubelet-config is not given: evictd checks the --config file " + kubelet + " as the kubelet's configuration.",
			"warning: the kubelet's evictionHard in " + kubelet,
		}, nil},
		{"no kubelet configuration, no warning", nil, nil, []string{"the kubelet's"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCmd(append([]string{"check-config"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit code %d, want 0; stderr: %s", code, errOut)
			}
			// Notes and warnings go to stderr, the document alone to stdout.
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			for _, w := range tc.dontWant {
				if strings.Contains(errOut, w) {
					t.Errorf("stderr has %q:\n%s", w, errOut)
				}
			}
			if strings.Contains(out, "warning: ") || strings.Contains(out, "note: ") {
				t.Errorf("stdout carries notes or warnings:\n%s", out)
			}
		})
	}
	t.Run("a bad kubelet file is an error naming it", func(t *testing.T) {
		_, errOut, code := runCmd("check-config", "--kubelet-config", filepath.Join(dir, "broken.yml"))
		if code != 1 || !strings.Contains(errOut, filepath.Join(dir, "broken.yml")) || !strings.Contains(errOut, "evictionHard") {
			t.Errorf("got exit %d, stderr %q; want 1 and an error naming the file and evictionHard", code, errOut)
		}
		_, errOut, code = runCmd("check-config", "--kubelet-config", filepath.Join(dir, "none.yaml"))
		if code != 1 || !strings.Contains(errOut, "read --kubelet-config file") {
			t.Errorf("got exit %d, stderr %q; want 1 and an error naming --kubelet-config", code, errOut)
		}
	})
}

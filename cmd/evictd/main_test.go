package main

import (
	"bytes"
	"strings"
	"testing"
)

func runCmd(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestCheckConfigAcceptsKubeletForms(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string // lines of the table that must appear
	}{
		{"defaults", nil, []string{
			"memory.available  ", "100Mi", "nodefs.available", "10%", "nodefs.inodesFree", "imagefs.available", "15%", "imagefs.inodesFree",
			"allocatableMemory.available", "derived from memory.available",
		}},
		{"quantity and percent", []string{"--eviction-hard=memory.available<1Gi,nodefs.available<5%"}, []string{"1Gi", "5%", "--eviction-hard"}},
		{"decimal quantity", []string{"--eviction-hard=memory.available<.5Gi"}, []string{".5Gi"}},
		{"soft with grace", []string{"--eviction-soft=memory.available<1.5Gi", "--eviction-soft-grace-period=memory.available=1m30s"}, []string{"1.5Gi", "1m30s", "soft"}},
		{"minimum reclaim", []string{"--eviction-minimum-reclaim=memory.available=0Mi,nodefs.available=500Mi,imagefs.available=2Gi"}, []string{"500Mi", "2Gi"}},
		{"0% disables a signal", []string{"--eviction-hard=memory.available<100Mi,nodefs.available<0%"}, []string{"memory.available"}},
		{"merge defaults", []string{"--eviction-hard=memory.available<1Gi", "--merge-default-eviction-settings"}, []string{"1Gi", "nodefs.available", "imagefs.inodesFree"}},
		{"pid threshold", []string{"--eviction-hard=pid.available<1000"}, []string{"pid.available", "1000"}},
		{"a soft threshold not beyond its hard one is a warning",
			[]string{"--eviction-soft=memory.available<50Mi", "--eviction-soft-grace-period=memory.available=1m"},
			[]string{"warning: --eviction-soft: soft threshold memory.available<50Mi is not beyond the hard threshold memory.available<100Mi (default): it can never act before the hard one"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCmd(append([]string{"check-config"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit code %d, want 0; stderr: %s", code, errOut)
			}
			// The table on stdout, the warnings on stderr.
			for _, w := range tc.want {
				if !strings.Contains(out+errOut, w) {
					t.Errorf("output lacks %q:\nstdout:\n%s\nstderr:\n%s", w, out, errOut)
				}
			}
		})
	}
	t.Run("0% leaves no nodefs threshold", func(t *testing.T) {
		out, _, _ := runCmd("check-config", "--eviction-hard=memory.available<100Mi,nodefs.available<0%")
		if strings.Contains(out, "nodefs.available ") {
			t.Errorf("nodefs.available<0%% should be ignored, got:\n%s", out)
		}
	})
}

func TestCheckConfigRejectsWithKubeletMessages(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown signal", []string{"--eviction-hard=memory.free<1Gi"}, "unsupported eviction signal memory.free"},
		{"percent above 100", []string{"--eviction-hard=nodefs.available<101%"}, "eviction percentage threshold nodefs.available must be <= 100%: 101%"},
		{"negative percent", []string{"--eviction-hard=nodefs.available<-5%"}, "eviction percentage threshold nodefs.available must be >= 0%: -5%"},
		{"zero quantity", []string{"--eviction-hard=memory.available<0"}, "eviction threshold memory.available must be positive: 0"},
		{"negative quantity", []string{"--eviction-hard=memory.available<-1Gi"}, "eviction threshold memory.available must be positive: -1Gi"},
		{"bad quantity", []string{"--eviction-hard=memory.available<lots"}, "quantities must match the regular expression"},
		{"soft without grace", []string{"--eviction-soft=memory.available<1Gi"}, "grace period must be specified for the soft eviction threshold memory.available"},
		{"negative grace", []string{"--eviction-soft=memory.available<1Gi", "--eviction-soft-grace-period=memory.available=-30s"}, "invalid eviction grace period specified: -30s, must be a positive value"},
		{"bad grace", []string{"--eviction-soft=memory.available<1Gi", "--eviction-soft-grace-period=memory.available=soon"}, `time: invalid duration "soon"`},
		{"zero percent reclaim", []string{"--eviction-minimum-reclaim=nodefs.available=0%"}, "eviction percentage minimum reclaim nodefs.available must be positive: 0%"},
		{"negative reclaim", []string{"--eviction-minimum-reclaim=nodefs.available=-1Gi"}, "negative eviction minimum reclaim specified for nodefs.available"},
		{"wrong separator", []string{"--eviction-hard=memory.available=1Gi"}, "--eviction-hard"},
		{"unknown flag", []string{"--evict-hard=memory.available<1Gi"}, "unknown flag: --evict-hard"},
		{"bad driver", []string{"--cgroup-driver=upstart"}, "upstart"},
		{"missing config file", []string{"--config=/nonexistent/kubelet.yaml"}, "/nonexistent/kubelet.yaml"},
		{"no threshold that fits this node's memory", []string{"--eviction-hard=memory.available<1000Ti", "--enforce-node-allocatable=none"},
			"--eviction-hard: threshold memory.available<1000Ti is 1000Ti, at or above the capacity of memory.available on this node"},
		{"negative cap", []string{"--max-evictions-per-hour=-3"}, `--max-evictions-per-hour: invalid value "-3": must not be negative`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCmd(append([]string{"check-config"}, tc.args...)...)
			if code == 0 {
				t.Fatalf("exit code 0, want non-zero; stdout: %s", out)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr: got %q, want it to contain %q", errOut, tc.want)
			}
			if strings.Contains(out, "SIGNAL") {
				t.Errorf("a rejected configuration printed thresholds:\n%s", out)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"simulate"}, 2, "--snapshot FILE is required"},
		{[]string{"simulate", "--snapshot", "/nonexistent.json"}, 1, "/nonexistent.json"},
		{[]string{"--housekeeping-interval=0s"}, 1, "housekeeping-interval"},
		{[]string{"check-config", "extra"}, 2, `unexpected argument "extra"`},
		// The agent observes the node once before its loop starts and
		// refuses to start when its capacities make every threshold
		// always met.
		{[]string{"--eviction-hard=memory.available<1000Ti", "--enforce-node-allocatable=none", "--container-runtime-endpoint=unix:///nonexistent/evictd-test.sock",
			"--runtime-request-timeout=1s", "--metrics-bind-address=127.0.0.1:0"}, 1,
			"no threshold can hold on this node; refusing to start"},
	} {
		_, errOut, code := runCmd(tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("evictd %v: got exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}

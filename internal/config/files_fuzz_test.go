package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/evictd/evictd/thresholds"
)

// The fuzz targets below write arbitrary bytes to a file and complete a
// configuration from it, as evictd does at startup. Whatever the bytes, the
// result is an error that names the file, or a configuration that holds
// together; and the same file gives the same answer twice.

// completeFile writes data to a file in dir and completes a configuration
// with flag (--config or --node-config) naming it.
func completeFile(t *testing.T, flag string, data []byte) (string, *Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fuzz.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := complete(flag + "=" + path)
	return path, c, err
}

// checkCompleted fails t unless c and err, completed from the file at path,
// are a clear error or a configuration that holds together, the same on a
// second reading.
func checkCompleted(t *testing.T, flag, path string, c *Config, err error) {
	t.Helper()
	checkCompletedBy(t, func() (*Config, error) { return complete(flag + "=" + path) }, path, c, err)
}

// checkCompletedBy is checkCompleted for a configuration that again
// completes a second time.
func checkCompletedBy(t *testing.T, again func() (*Config, error), path string, c *Config, err error) {
	t.Helper()
	c2, err2 := again()
	if err != nil {
		if !strings.Contains(err.Error(), path) {
			t.Fatalf("error %q does not name the file %s", err, path)
		}
		if c != nil {
			t.Fatalf("error %q with a configuration", err)
		}
		if err2 == nil || err2.Error() != err.Error() {
			t.Fatalf("the same file read twice: error %q, then %v", err, err2)
		}
		return
	}
	if err2 != nil {
		t.Fatalf("the same file read twice: a configuration, then error %v", err2)
	}
	got, second := describeAll(c.Thresholds), describeAll(c2.Thresholds)
	if !slices.Equal(got, second) || !slices.Equal(c.Notes, c2.Notes) {
		t.Fatalf("the same file read twice:\n%q %q\nthen\n%q %q", got, c.Notes, second, c2.Notes)
	}
	for _, th := range c.Thresholds {
		if !th.Signal.Valid() {
			t.Fatalf("%s: unknown signal", th.Describe())
		}
		if q := th.Value.Quantity; q != nil && q.Sign() <= 0 {
			t.Fatalf("%s: quantity not positive", th.Describe())
		}
		if pc := th.Value.Percentage; th.Value.Quantity == nil && !(pc >= 0 && pc <= 1) {
			t.Fatalf("%s: percentage %v outside [0, 1]", th.Describe(), pc)
		}
		if th.GracePeriod < 0 {
			t.Fatalf("%s: negative grace period", th.Describe())
		}
	}
	if c.SystemReservedMemory < 0 || c.KubeReservedMemory < 0 {
		t.Fatalf("reserved memory system %d, kube %d: negative", c.SystemReservedMemory, c.KubeReservedMemory)
	}
	if c.PressureTransitionPeriod < 0 || c.MinimumImageTTL < 0 || c.NodeStatusUpdateFrequency <= 0 ||
		c.HousekeepingInterval <= 0 || c.RuntimeRequestTimeout <= 0 || c.VolumeStatsAggPeriod <= 0 || c.FastPollInterval < 0 ||
		c.LocalKillAfter < 0 || c.MaxObservationAge <= 0 || c.StuckAfter <= 0 || c.RuntimeRetry <= 0 ||
		c.RuntimeRetryMax < c.RuntimeRetry || c.CleanupTimeout <= 0 {
		t.Fatalf("a duration out of range: %+v", c)
	}
	if c.CgroupDriver != "cgroupfs" && c.CgroupDriver != "systemd" {
		t.Fatalf("cgroup driver %q", c.CgroupDriver)
	}
	if !strings.HasPrefix(c.CgroupRoot, "/") {
		t.Fatalf("cgroup root %q", c.CgroupRoot)
	}
}

func describeAll(ths []thresholds.Threshold) []string {
	out := make([]string, len(ths))
	for i, th := range ths {
		out[i] = th.Describe()
	}
	return out
}

// FuzzKubeletConfig completes a configuration from a KubeletConfiguration
// file it imports (--import-kubelet-config). Seeds: testdata/kubelet-*.yaml
// and edge cases.
func FuzzKubeletConfig(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		path, c, err := completeFile(t, "--import-kubelet-config", data)
		checkCompleted(t, "--import-kubelet-config", path, c, err)
	})
}

// FuzzAgentConfig completes a configuration from evictd's own file
// (--config: an AgentConfiguration or, deprecated, a KubeletConfiguration),
// then from the same bytes as a --config-dir drop-in over
// examples/config.yaml. Seeds: testdata/fuzz/FuzzAgentConfig and
// examples/config.yaml.
func FuzzAgentConfig(f *testing.F) {
	example, err := os.ReadFile("../../examples/config.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Fuzz(func(t *testing.T, data []byte) {
		path, c, err := completeFile(t, "--config", data)
		checkCompleted(t, "--config", path, c, err)
		checkProvenance(t, c)

		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "10-fuzz.conf"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		overExample := func() (*Config, error) { return complete("--config=../../examples/config.yaml", "--config-dir="+dir) }
		c, err = overExample()
		checkCompletedBy(t, overExample, dir, c, err)
		checkProvenance(t, c)
	})
}

// checkProvenance fails t unless c (nil: nothing to check) tells where
// every setting came from.
func checkProvenance(t *testing.T, c *Config) {
	t.Helper()
	if c == nil {
		return
	}
	names := map[string]bool{}
	for _, s := range c.Provenance() {
		names[s.Name] = true
		if !slices.Contains(sourceOrder, s.Source.Kind) {
			t.Fatalf("%s[%s]: source %+v of no known kind", s.Name, s.Key, s.Source)
		}
	}
	for _, f := range fields {
		if !names[f.name] {
			t.Fatalf("no provenance for %s", f.name)
		}
	}
}

// FuzzNodeConfig completes a configuration from an OpenShift
// node-config.yaml (--node-config). Seeds: testdata/node-config-*.yaml and
// edge cases.
func FuzzNodeConfig(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		path, c, err := completeFile(t, "--node-config", data)
		checkCompleted(t, "--node-config", path, c, err)
	})
}

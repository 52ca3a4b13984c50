package systemd

import (
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/signals/host"
)

// defaultMetricsAddr is evictd's default --metrics-bind-address.
func defaultMetricsAddr(t *testing.T) (addr, port string) {
	t.Helper()
	fs, _ := config.NewFlagSet("evictd")
	f := fs.Lookup("metrics-bind-address")
	if f == nil {
		t.Fatal("evictd has no --metrics-bind-address")
	}
	_, port, err := net.SplitHostPort(f.DefValue)
	if err != nil {
		t.Fatalf("default --metrics-bind-address %q: %v", f.DefValue, err)
	}
	return f.DefValue, port
}

// TestUnitBindsOnlyTheMetricsPort checks that the one port the unit lets
// evictd bind is the metrics port evictd and its configuration file use.
func TestUnitBindsOnlyTheMetricsPort(t *testing.T) {
	_, port := defaultMetricsAddr(t)
	u := unitSettings(t, unitFile)
	if got, want := u["Service"]["SocketBindAllow"], []string{"tcp:" + port}; !slices.Equal(got, want) {
		t.Errorf("got SocketBindAllow=%q, want %q: evictd's default metrics port", got, want)
	}
	v := shipped(t).MetricsBindAddress
	if _, p, err := net.SplitHostPort(v); err != nil || p != port {
		t.Errorf("got metricsBindAddress %s from %s, want port %s, the one SocketBindAllow= allows", v, configFile, port)
	}
}

// TestUnitWritesOnlyWakeupFiles checks that the unit makes writable
// exactly the cgroup files evictd writes, all of them optional ("-"): to
// arm its wake-ups (internal/wakeup), the cgroup.event_control of the root
// and kubepods memory cgroups on cgroup v1 (memcg thresholds) and kubepods'
// memory.pressure on cgroup v2 (a PSI trigger), found where evictd finds
// them on a node's cgroup mount (host.MemoryCgroupDirs), for either
// cgroup driver.
func TestUnitWritesOnlyWakeupFiles(t *testing.T) {
	const mount = "/sys/fs/cgroup"
	var want []string
	for _, v2 := range []bool{false, true} {
		// A cgroup mount evictd recognises as v1 or v2.
		dir := t.TempDir()
		probe, content := filepath.Join(dir, "memory", "memory.usage_in_bytes"), "0\n"
		if v2 {
			probe, content = filepath.Join(dir, "cgroup.controllers"), "cpu memory pids\n"
		}
		if err := os.MkdirAll(filepath.Dir(probe), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(probe, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, driver := range []string{host.DriverSystemd, host.DriverCgroupfs} {
			root, kubepods, isV2, err := host.MemoryCgroupDirs(host.Config{
				ProcRoot: "/proc", CgroupMount: dir, CgroupRoot: "/", CgroupDriver: driver, KubeletRootDir: "/var/lib/kubelet",
			})
			if err != nil {
				t.Fatalf("memory cgroups (v2 %t, %s): %v", v2, driver, err)
			}
			if isV2 != v2 {
				t.Fatalf("got v2 %t, want %t", isV2, v2)
			}
			onNode := func(p, file string) string {
				rel, err := filepath.Rel(dir, p)
				if err != nil {
					t.Fatal(err)
				}
				return path.Join(mount, filepath.ToSlash(rel), file)
			}
			if v2 {
				want = append(want, onNode(kubepods, "memory.pressure"))
			} else {
				want = append(want, onNode(root, "cgroup.event_control"), onNode(kubepods, "cgroup.event_control"))
			}
		}
	}
	slices.Sort(want)
	want = slices.Compact(want)

	var got []string
	for _, p := range unitSettings(t, unitFile)["Service"]["ReadWritePaths"] {
		for _, f := range strings.Fields(p) {
			file, optional := strings.CutPrefix(f, "-")
			if !optional {
				t.Errorf("got ReadWritePaths=%s, want it optional (\"-\"): no path exists on every node", f)
			}
			got = append(got, file)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("got ReadWritePaths %q,\nwant exactly the files evictd writes %q", got, want)
	}
}

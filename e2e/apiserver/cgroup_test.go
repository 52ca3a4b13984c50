package apiserver

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/evictd/evictd/internal/testing/testalloc"
)

// This file holds the real cgroup v1 side of the end-to-end test: a
// kubepods-shaped hierarchy under a test parent used as --cgroup-root, pod
// cgroups named as the kubelet's cgroupfs driver names them, and child
// processes that hold an exact amount of memory in a pod cgroup (as
// signals/host's real cgroup test does).

// cgroupMount is where this machine's cgroup v1 controllers are mounted.
const cgroupMount = "/sys/fs/cgroup"

// allocEnv makes the test binary a child that maps and faults in this many
// MiB of anonymous memory once told to on stdin, says "ready", and holds the
// memory until its stdin closes or it is killed.
const allocEnv = "EVICTD_E2E_ALLOC_MIB"

// TestMain makes the binary an allocator when allocEnv is set.
func TestMain(m *testing.M) {
	if v := os.Getenv(allocEnv); v != "" {
		os.Exit(testalloc.Hold(allocEnv, v, 1024))
	}
	os.Exit(m.Run())
}

// cgroupV1Available reports why the test cannot build cgroups here, or "".
func cgroupV1Available() string {
	if os.Geteuid() != 0 {
		return "creating cgroups needs root"
	}
	for c, probe := range map[cgroup1.Name]string{cgroup1.Memory: "memory.usage_in_bytes", cgroup1.Pids: "cgroup.procs"} {
		if _, err := os.Stat(filepath.Join(cgroupMount, string(c), probe)); err != nil {
			return fmt.Sprintf("needs the cgroup v1 %s controller at %s: %v", c, filepath.Join(cgroupMount, string(c)), err)
		}
	}
	return ""
}

func cgroupHierarchy() ([]cgroup1.Subsystem, error) {
	return []cgroup1.Subsystem{cgroup1.NewMemory(cgroupMount), cgroup1.NewPids(cgroupMount)}, nil
}

// newCgroup creates the cgroup at rel (relative to each controller's mount)
// in the memory and pids controllers, with a memory limit when limit > 0,
// and removes it when top ends (t is the test that fails if it cannot). Cleanups run last-registered first, so a
// cgroup created after its parent is removed before it, and an allocator
// started after its cgroup was created is killed before the cgroup goes.
func newCgroup(t, top testing.TB, rel string, limit int64) cgroup1.Cgroup {
	t.Helper()
	res := &specs.LinuxResources{}
	if limit > 0 {
		res.Memory = &specs.LinuxMemory{Limit: &limit}
	}
	cg, err := cgroup1.New(cgroup1.StaticPath(rel), res, cgroup1.WithHierarchy(cgroupHierarchy))
	top.Cleanup(func() { removeCgroup(top, rel) })
	if err != nil {
		t.Fatalf("create cgroup %s: %v", rel, err)
	}
	return cg
}

// removeCgroup removes the cgroup at rel from the memory and pids
// controllers. A cgroup whose last task just exited can be busy for a moment.
func removeCgroup(t testing.TB, rel string) {
	for _, c := range []string{"memory", "pids"} {
		dir := filepath.Join(cgroupMount, c, rel)
		var err error
		for attempt := 0; attempt < 100; attempt++ {
			if err = os.Remove(dir); err == nil || errors.Is(err, fs.ErrNotExist) {
				err = nil
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("remove cgroup %s: %v", dir, err)
		}
	}
}

package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/evictd/evictd/internal/testing/testalloc"
	"github.com/evictd/evictd/signals"
)

// allocEnv makes the test binary a child that maps and faults in this many
// MiB of anonymous memory once told to on stdin, says "ready", and holds the
// memory until its stdin closes or it is killed.
const allocEnv = "EVICTD_HOST_TEST_ALLOC_MIB"

func TestMain(m *testing.M) {
	if v := os.Getenv(allocEnv); v != "" {
		os.Exit(testalloc.Hold(allocEnv, v, 512))
	}
	os.Exit(m.Run())
}

// TestRealCgroupV1 builds a kubepods-shaped hierarchy in this machine's
// cgroup v1 memory and pids controllers, under a test parent used as the
// cgroup root, puts a process that touches allocMiB in a Burstable pod and
// checks that the pod's working set and allocatableMemory.available move by
// that much.
func TestRealCgroupV1(t *testing.T) {
	const (
		mount    = "/sys/fs/cgroup"
		allocMiB = 200
		limit    = 1 << 30
	)
	if os.Geteuid() != 0 {
		t.Skip("creating cgroups needs root")
	}
	for _, c := range []cgroup1.Name{cgroup1.Memory, cgroup1.Pids} {
		probe := map[cgroup1.Name]string{cgroup1.Memory: "memory.usage_in_bytes", cgroup1.Pids: "cgroup.procs"}[c]
		if _, err := os.Stat(filepath.Join(mount, string(c), probe)); err != nil {
			t.Skipf("no cgroup v1 %s controller at %s: %v", c, mount, err)
		}
	}
	hierarchy := func() ([]cgroup1.Subsystem, error) {
		return []cgroup1.Subsystem{cgroup1.NewMemory(mount), cgroup1.NewPids(mount)}, nil
	}
	tests := []struct {
		driver string
		// paths of the cgroup root, kubepods, burstable and the pod,
		// relative to each controller's mount, from the test's id and
		// the pod UID
		paths func(id, uid string) [4]string
	}{
		{DriverCgroupfs, func(id, uid string) [4]string {
			root := "/evictd-test-" + id
			return [4]string{root, root + "/kubepods", root + "/kubepods/burstable", root + "/kubepods/burstable/pod" + uid}
		}},
		{DriverSystemd, func(id, uid string) [4]string {
			p := "evictdtest" + id
			root := "/" + p + ".slice"
			kubepods := root + "/" + p + "-kubepods.slice"
			burstable := kubepods + "/" + p + "-kubepods-burstable.slice"
			return [4]string{root, kubepods, burstable, burstable + "/" + p + "-kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.driver, func(t *testing.T) {
			id, uid := randomHex(t, 4), randomUID(t)
			paths := tc.paths(id, uid)
			var cgs [4]cgroup1.Cgroup
			for i, p := range paths {
				res := &specs.LinuxResources{}
				if i == 1 {
					res.Memory = &specs.LinuxMemory{Limit: ptr(int64(limit))}
					res.Pids = &specs.LinuxPids{Limit: ptr(int64(1000))}
				}
				cg, err := cgroup1.New(cgroup1.StaticPath(p), res, cgroup1.WithHierarchy(hierarchy))
				// Registered now, run in reverse: the deepest cgroup
				// goes first, after the process in it is gone.
				t.Cleanup(func() { removeCgroup(t, mount, p) })
				if err != nil {
					t.Fatalf("create cgroup %s: %v", p, err)
				}
				cgs[i] = cg
			}
			pod := cgs[3]
			child := testalloc.Start(t, t, allocEnv, allocMiB)
			if err := pod.AddProc(uint64(child.PID())); err != nil {
				t.Fatalf("move child into %s: %v", paths[3], err)
			}

			cfg := Config{ProcRoot: "/proc", CgroupMount: mount, CgroupRoot: paths[0], CgroupDriver: tc.driver, KubeletRootDir: t.TempDir()}
			pods, err := DiscoverPods(cfg)
			wantPods := []signals.Pod{{Name: "pod" + uid, UID: uid, QOS: signals.Burstable}}
			if err != nil || !reflect.DeepEqual(pods, wantPods) {
				t.Fatalf("DiscoverPods got %+v, %v; want %+v", pods, err, wantPods)
			}
			reader, err := NewPodStatsReader(cfg)
			if err != nil {
				t.Fatal(err)
			}
			alloc, err := NewAllocatableSource(cfg)
			if err != nil {
				t.Fatal(err)
			}
			measure := func() (signals.PodStats, signals.Observation) {
				t.Helper()
				stats, err := reader.Read(context.Background(), pods, now, signals.PodMemory|signals.PodProcesses)
				if err != nil {
					t.Fatalf("pod stats: %v", err)
				}
				st, ok := stats[uid]
				if !ok || st.MemoryWorkingSet == nil || st.Processes == nil {
					t.Fatalf("pod stats: got %+v, want the pod's memory and processes", stats)
				}
				return st, observeOne(t, alloc)
			}

			podBefore, allocBefore := measure()
			child.Allocate(t)
			podAfter, allocAfter := measure()

			const want = allocMiB << 20
			tolerance := int64(want / 20) // 5%
			podDelta := *podAfter.MemoryWorkingSet - *podBefore.MemoryWorkingSet
			allocDelta := allocBefore.Available - allocAfter.Available
			t.Logf("%s: allocated %d MiB; pod working set %d -> %d (+%.1f MiB); allocatable available %d -> %d (-%.1f MiB) of %d",
				tc.driver, allocMiB, *podBefore.MemoryWorkingSet, *podAfter.MemoryWorkingSet, float64(podDelta)/(1<<20),
				allocBefore.Available, allocAfter.Available, float64(allocDelta)/(1<<20), allocAfter.Capacity)
			if d := podDelta - want; d < -tolerance || d > tolerance {
				t.Errorf("pod working set moved by %d, want %d ± %d", podDelta, want, tolerance)
			}
			if d := allocDelta - want; d < -tolerance || d > tolerance {
				t.Errorf("allocatableMemory.available moved by %d, want %d ± %d", -allocDelta, -want, tolerance)
			}
			if allocAfter.Capacity != limit {
				t.Errorf("got allocatable capacity %d, want the kubepods limit %d", allocAfter.Capacity, limit)
			}

			// Cross-check with containerd/cgroups' own reading of the pod.
			m, err := pod.Stat(cgroup1.IgnoreNotExist)
			if err != nil {
				t.Fatalf("library stat: %v", err)
			}
			libWS := int64(m.Memory.Usage.Usage) - int64(m.Memory.TotalInactiveFile)
			if d := libWS - *podAfter.MemoryWorkingSet; d < -tolerance || d > tolerance {
				t.Errorf("got working set %d, containerd/cgroups reads %d", *podAfter.MemoryWorkingSet, libWS)
			}
			// The child's runtime may start a thread at any time: compare
			// with the task list read just before and just after.
			countTasks := func() int64 {
				tasks, err := pod.Tasks(cgroup1.Pids, true)
				if err != nil {
					t.Fatalf("library tasks: %v", err)
				}
				return int64(len(tasks))
			}
			for attempt := 1; ; attempt++ {
				before := countTasks()
				st, _ := measure()
				after := countTasks()
				if before != after && attempt < 5 {
					continue
				}
				lo, hi := min(before, after), max(before, after)
				if got := *st.Processes; got < 1 || got < lo || got > hi {
					t.Errorf("got %d processes, want the %d..%d tasks listed in the pod's pids cgroup", got, lo, hi)
				}
				break
			}
		})
	}
}

// removeCgroup removes the cgroup at rel from the memory and pids
// controllers. A cgroup whose last task just exited can be busy for a moment.
func removeCgroup(t *testing.T, mount, rel string) {
	for _, c := range []string{"memory", "pids"} {
		dir := filepath.Join(mount, c, rel)
		var err error
		for attempt := 0; attempt < 50; attempt++ {
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

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func randomUID(t *testing.T) string {
	h := randomHex(t, 16)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func ptr[T any](v T) *T { return &v }

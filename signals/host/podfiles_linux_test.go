package host

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/cgroups/v3/cgroup1"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/evictd/evictd/signals"
)

// openUnder returns this process's descriptors open on files under dir,
// by descriptor number, with the file each names.
func openUnder(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil {
			continue // the directory's own descriptor, closed by now
		}
		if strings.HasPrefix(target, dir+"/") {
			out[e.Name()] = target
		}
	}
	return out
}

func fixtureReader(t *testing.T, cgroup string) *PodStatsReader {
	t.Helper()
	r, err := NewPodStatsReader(fixtureConfig(t, fixture(t, "proc"), cgroup, DriverCgroupfs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// TestPodStatsReaderKinds: the reader reads only the kinds asked for. With
// every pids file removed a memory read succeeds, with every memory file
// removed a task count read succeeds, and with the whole pod hierarchy
// gone a read of neither kind reads nothing and fails nothing.
func TestPodStatsReaderKinds(t *testing.T) {
	f := fixturePods["cgroupv1"].pods
	var pods []signals.Pod
	for _, p := range f {
		pods = append(pods, p.pod())
	}
	only := func(keep func(*signals.PodStats)) map[string]signals.PodStats {
		out := map[string]signals.PodStats{}
		for _, p := range f {
			st := p.stats()
			keep(&st)
			out[p.uid] = st
		}
		return out
	}
	tests := []struct {
		name   string
		remove string
		kinds  signals.PodStatsKinds
		want   map[string]signals.PodStats
	}{
		{"memory without pids files", "pids/kubepods", signals.PodMemory,
			only(func(st *signals.PodStats) { st.Processes = nil })},
		{"processes without memory files", "memory/kubepods", signals.PodProcesses,
			only(func(st *signals.PodStats) { st.MemoryWorkingSet = nil })},
		{"disk alone reads no cgroup file", "", signals.PodDisk, map[string]signals.PodStats{}},
		{"nothing reads no cgroup file", "", 0, map[string]signals.PodStats{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cgroup := copyFixture(t, "cgroupv1")
			r := fixtureReader(t, cgroup)
			if tc.remove != "" {
				edit(t, cgroup, map[string]*string{tc.remove: nil})
			} else {
				// Not even the hierarchy's version is probed.
				edit(t, cgroup, map[string]*string{"memory": nil, "pids": nil})
			}
			got, err := r.Read(context.Background(), pods, now, tc.kinds)
			if err != nil {
				t.Errorf("got error %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %s, want %s", dumpStats(got), dumpStats(tc.want))
			}
			if n := openUnder(t, cgroup); len(n) != r.files.open {
				t.Errorf("%d files open under the tree, the reader counts %d", len(n), r.files.open)
			}
		})
	}
}

// TestPodStatsReaderKeepsFiles: the files read stay open from one Read to
// the next and are read again through the same descriptors; a figure
// rewritten in place is seen; a pod the next Read no longer lists has its
// files closed, and Close closes the rest.
func TestPodStatsReaderKeepsFiles(t *testing.T) {
	cgroup := copyFixture(t, "cgroupv1")
	r := fixtureReader(t, cgroup)
	f := fixturePods["cgroupv1"].pods
	var pods []signals.Pod
	for _, p := range f {
		pods = append(pods, p.pod())
	}
	ctx := context.Background()
	if _, err := r.Read(ctx, pods, now, allPodKinds); err != nil {
		t.Fatal(err)
	}
	first := openUnder(t, cgroup)
	// Three files a pod on cgroup v1: memory.usage_in_bytes, memory.stat
	// and pids.current.
	if len(first) != 3*len(pods) || r.files.open != len(first) {
		t.Fatalf("got %d files open (reader counts %d), want %d: %v", len(first), r.files.open, 3*len(pods), first)
	}

	g := f[0]
	usage := filepath.Join(cgroup, "memory/kubepods/pod"+g.uid, "memory.usage_in_bytes")
	if err := os.WriteFile(usage, []byte("2048576000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := r.Read(ctx, pods, now, allPodKinds)
	if err != nil {
		t.Fatal(err)
	}
	if ws := got[g.uid].MemoryWorkingSet; ws == nil || *ws != 2048576000-48576000 {
		t.Errorf("after the rewrite got working set %v, want %d", ws, 2048576000-48576000)
	}
	if again := openUnder(t, cgroup); !reflect.DeepEqual(again, first) {
		t.Errorf("the second Read opened other files:\ngot  %v\nwant %v", again, first)
	}

	// The Guaranteed pod has gone.
	if _, err := r.Read(ctx, pods[1:], now, signals.PodMemory); err != nil {
		t.Fatal(err)
	}
	for fd, file := range openUnder(t, cgroup) {
		if strings.Contains(file, g.uid) {
			t.Errorf("fd %s still open on %s of the pod gone", fd, file)
		}
	}
	if n := len(openUnder(t, cgroup)); n != 3*(len(pods)-1) || r.files.open != n {
		t.Errorf("got %d files open (reader counts %d), want %d", n, r.files.open, 3*(len(pods)-1))
	}
	// A pass that reads nothing still forgets the pods gone.
	if _, err := r.Read(ctx, pods[2:], now, 0); err != nil {
		t.Fatal(err)
	}
	if n := len(openUnder(t, cgroup)); n != 3 || r.files.open != 3 {
		t.Errorf("got %d files open (reader counts %d), want 3", n, r.files.open)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if n := openUnder(t, cgroup); len(n) != 0 || r.files.open != 0 {
		t.Errorf("after Close got %v open (reader counts %d), want none", n, r.files.open)
	}
}

// TestPodStatsReaderBound: beyond its bound the reader opens, reads and
// closes; the figures are the same and no more files stay open.
func TestPodStatsReaderBound(t *testing.T) {
	for tree, f := range fixturePods {
		t.Run(tree, func(t *testing.T) {
			cgroup := copyFixture(t, tree)
			r, err := NewPodStatsReader(fixtureConfig(t, fixture(t, "proc"), cgroup, f.driver))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Close() })
			r.files.max = 4
			var pods []signals.Pod
			want := map[string]signals.PodStats{}
			for _, p := range f.pods {
				pods = append(pods, p.pod())
				want[p.uid] = p.stats()
			}
			for pass := range 3 {
				got, err := r.Read(context.Background(), pods, now, allPodKinds)
				if err != nil {
					t.Fatalf("pass %d: %v", pass, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("pass %d: got %s, want %s", pass, dumpStats(got), dumpStats(want))
				}
				if n := len(openUnder(t, cgroup)); n != 4 || r.files.open != 4 {
					t.Errorf("pass %d: got %d files open (reader counts %d), want the bound, 4", pass, n, r.files.open)
				}
			}
		})
	}
}

// TestKeptFileLimit: the bound leaves reservedFiles of RLIMIT_NOFILE to
// the rest of evictd and never exceeds maxKeptFiles; under systemd's
// LimitNOFILE=1024 it keeps 512 files, those of 256 pods ranked by memory.
func TestKeptFileLimit(t *testing.T) {
	if got := keptFileLimit(); got < 0 || got > maxKeptFiles {
		t.Errorf("got %d, want 0 to %d", got, maxKeptFiles)
	}
	if reservedFiles != 512 {
		t.Errorf("reservedFiles is %d; systemd/evictd.service's LimitNOFILE=1024 leaves 512 files", reservedFiles)
	}
}

// TestPodStatsReaderCgroupRemoved puts a pod cgroup in this machine's
// cgroup v1 memory and pids controllers, reads it through kept files,
// removes the cgroup while the pod is still listed (the API server's view
// lags the node's), and checks that the next Read finds the files dead
// (ENODEV), tries once to open them again, and reports the pod without
// stats, as a pod whose cgroup is missing; then that a cgroup made again
// under the same name is read again.
func TestPodStatsReaderCgroupRemoved(t *testing.T) {
	const mount = "/sys/fs/cgroup"
	if os.Geteuid() != 0 {
		t.Skip("creating cgroups needs root")
	}
	for _, c := range []string{"memory/memory.usage_in_bytes", "pids/cgroup.procs"} {
		if _, err := os.Stat(filepath.Join(mount, c)); err != nil {
			t.Skipf("no cgroup v1 controller at %s: %v", filepath.Join(mount, c), err)
		}
	}
	hierarchy := func() ([]cgroup1.Subsystem, error) {
		return []cgroup1.Subsystem{cgroup1.NewMemory(mount), cgroup1.NewPids(mount)}, nil
	}
	root := "/evictd-test-" + randomHex(t, 4)
	uid := randomUID(t)
	pod := root + "/kubepods/burstable/pod" + uid
	create := func() {
		t.Helper()
		for _, p := range []string{root, root + "/kubepods", root + "/kubepods/burstable", pod} {
			if _, err := cgroup1.New(cgroup1.StaticPath(p), &specs.LinuxResources{}, cgroup1.WithHierarchy(hierarchy)); err != nil {
				t.Fatalf("create cgroup %s: %v", p, err)
			}
		}
	}
	for _, p := range []string{root, root + "/kubepods", root + "/kubepods/burstable", pod} {
		t.Cleanup(func() { removeCgroup(t, mount, p) })
	}
	create()
	cfg := Config{ProcRoot: "/proc", CgroupMount: mount, CgroupRoot: root, CgroupDriver: DriverCgroupfs, KubeletRootDir: t.TempDir()}
	r, err := NewPodStatsReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	pods := []signals.Pod{{Name: "pod" + uid, UID: uid, QOS: signals.Burstable}}
	ctx := context.Background()
	read := func() (map[string]signals.PodStats, error) {
		t.Helper()
		return r.Read(ctx, pods, now, allPodKinds)
	}
	got, err := read()
	if err != nil || got[uid].MemoryWorkingSet == nil || got[uid].Processes == nil {
		t.Fatalf("got %s, %v; want the pod's memory and processes", dumpStats(got), err)
	}
	podFiles := func() []string {
		var files []string
		for _, c := range []string{"memory", "pids"} {
			for _, f := range openUnder(t, filepath.Join(mount, c, pod)) {
				files = append(files, f)
			}
		}
		slices.Sort(files)
		return files
	}
	if files := podFiles(); len(files) != 3 {
		t.Fatalf("got %v open, want the pod's three files", files)
	}

	removeCgroup(t, mount, pod)
	got, err = read()
	if len(got) != 0 || err == nil || !strings.Contains(err.Error(), "no such file or directory") {
		t.Errorf("after the cgroup's removal got %s, %v; want no stats and an error saying it is missing", dumpStats(got), err)
	}
	if r.files.open != 0 {
		t.Errorf("after the cgroup's removal the reader counts %d files open, want 0", r.files.open)
	}

	create()
	got, err = read()
	if err != nil || got[uid].MemoryWorkingSet == nil || got[uid].Processes == nil {
		t.Fatalf("after the cgroup came back got %s, %v; want the pod's memory and processes", dumpStats(got), err)
	}
	if files := podFiles(); len(files) != 3 || r.files.open != 3 {
		t.Errorf("after the cgroup came back got %v open (reader counts %d), want the pod's three files", files, r.files.open)
	}
}

package host

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/cgroups/v3/cgroup1"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/evictd/evictd/internal/testing/testalloc"
	"github.com/evictd/evictd/signals"
)

func TestParseOOMKill(t *testing.T) {
	tests := []struct {
		name, in string
		want     int64
		wantErr  string // a part of the error, "" for none
	}{
		{name: "memory.events v2", in: "low 0\nhigh 12\nmax 4\noom 3\noom_kill 3\noom_group_kill 0\n", want: 3},
		{name: "memory.oom_control v1", in: "oom_kill_disable 0\nunder_oom 0\noom_kill 17\n", want: 17},
		{name: "vmstat", in: "nr_free_pages 1\npgscan_kswapd 60000\noom_kill 9223372036854775807\n", want: 9223372036854775807},
		{name: "no trailing newline", in: "oom_kill 2", want: 2},
		{name: "kernel before 4.13", in: "oom_kill_disable 0\nunder_oom 0\n", wantErr: "no oom_kill line"},
		{name: "empty", in: "", wantErr: "no oom_kill line"},
		{name: "negative", in: "oom_kill -1\n", wantErr: `value "-1" is negative`},
		{name: "not a count", in: "oom_kill x\n", wantErr: `"x"`},
		{name: "overflow", in: "oom_kill 9223372036854775808\n", wantErr: "9223372036854775808"},
		{name: "twice", in: "oom_kill 1\noom_kill 2\n", wantErr: "key oom_kill given twice"},
		{name: "garbled other line", in: "oom 1 2\noom_kill 1\n", wantErr: `line 1 "oom 1 2"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseOOMKill("/f/memory.events", []byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "/f/memory.events") {
					t.Fatalf("got %d, %v; want an error naming the file and %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func readOOMKills(t *testing.T, cfg Config) (map[signals.OOMScope]int64, error) {
	t.Helper()
	r, err := NewOOMKillReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.OOMKills(context.Background(), now)
	if !got.Time.Equal(now) {
		t.Errorf("got time %s, want %s", got.Time, now)
	}
	return got.Counts, err
}

func TestOOMKillReaderFixtures(t *testing.T) {
	tests := []struct {
		name, proc, cgroup, driver string
		files                      map[string]*string // edits of the cgroup tree
		procFiles                  map[string]*string // edits of the proc tree
		want                       map[signals.OOMScope]int64
		wantErr                    []string // parts of the error
	}{
		{name: "v2 cgroupfs", cgroup: "cgroupv2", driver: DriverCgroupfs,
			want: map[signals.OOMScope]int64{signals.OOMScopeNode: 5, signals.OOMScopeKubepods: 3}},
		{name: "v2 systemd", cgroup: "cgroupv2-systemd", driver: DriverSystemd,
			want: map[signals.OOMScope]int64{signals.OOMScopeNode: 5, signals.OOMScopeKubepods: 3}},
		// v1 counts a kill in the victim's own cgroup only: no kubepods
		// scope, whatever kubepods' own memory.oom_control says.
		{name: "v1 cgroupfs", cgroup: "cgroupv1", driver: DriverCgroupfs,
			files: map[string]*string{"memory/kubepods/memory.oom_control": str("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")},
			want:  map[signals.OOMScope]int64{signals.OOMScopeNode: 5}},
		{name: "v1 systemd", cgroup: "cgroupv1-systemd", driver: DriverSystemd,
			want: map[signals.OOMScope]int64{signals.OOMScopeNode: 5}},
		{name: "v2 without kubepods yet", cgroup: "cgroupv2", driver: DriverCgroupfs,
			files: map[string]*string{"kubepods": nil},
			want:  map[signals.OOMScope]int64{signals.OOMScopeNode: 5, signals.OOMScopeKubepods: 0}},
		{name: "v2 kubepods without memory.events", cgroup: "cgroupv2", driver: DriverCgroupfs,
			files:   map[string]*string{"kubepods/memory.events": nil},
			want:    map[signals.OOMScope]int64{signals.OOMScopeNode: 5},
			wantErr: []string{"OOM kills of scope kubepods", "kubepods/memory.events", "no such file"}},
		{name: "v2 garbled memory.events", cgroup: "cgroupv2", driver: DriverCgroupfs,
			files:   map[string]*string{"kubepods/memory.events": str("oom 1\noom_kill many\n")},
			want:    map[signals.OOMScope]int64{signals.OOMScopeNode: 5},
			wantErr: []string{"kubepods/memory.events", `"many"`}},
		{name: "vmstat without oom_kill", cgroup: "cgroupv2", driver: DriverCgroupfs,
			procFiles: map[string]*string{"vmstat": str("nr_free_pages 1\n")},
			want:      map[signals.OOMScope]int64{signals.OOMScopeKubepods: 3},
			wantErr:   []string{"OOM kills of scope node", "vmstat: no oom_kill line"}},
		{name: "vmstat missing", cgroup: "cgroupv1", driver: DriverCgroupfs,
			procFiles: map[string]*string{"vmstat": nil},
			want:      map[signals.OOMScope]int64{},
			wantErr:   []string{"read ", "vmstat"}},
		{name: "not a cgroup mount", cgroup: "cgroupv2", driver: DriverCgroupfs,
			files:   map[string]*string{"cgroup.controllers": nil},
			want:    map[signals.OOMScope]int64{signals.OOMScopeNode: 5},
			wantErr: []string{"OOM kills of scope kubepods", "cgroup.controllers"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cgroup, proc := fixture(t, tt.cgroup), fixture(t, "proc")
			if tt.files != nil {
				cgroup = copyFixture(t, tt.cgroup)
				edit(t, cgroup, tt.files)
			}
			if tt.procFiles != nil {
				proc = copyFixture(t, "proc")
				edit(t, proc, tt.procFiles)
			}
			got, err := readOOMKills(t, fixtureConfig(t, proc, cgroup, tt.driver))
			if !maps.Equal(got, tt.want) {
				t.Errorf("got counts %v, want %v", got, tt.want)
			}
			if len(tt.wantErr) == 0 && err != nil {
				t.Errorf("got error %v, want none", err)
			}
			for _, part := range tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), part) {
					t.Errorf("got error %v, want one with %q", err, part)
				}
			}
		})
	}
}

// TestOOMKillReaderRealCgroupV1 makes the kernel OOM-kill a process in a
// pod cgroup of a kubepods-shaped hierarchy of this machine's cgroup v1
// memory controller, and checks what each scope can say of it: the node's
// count rises, as /proc/vmstat says; the kill counts in the victim's own
// cgroup and not in kubepods', so no kubepods scope is read. The kill
// raises the machine's /proc/vmstat oom_kill by one: a tool counting it
// meanwhile (hack/benchnode) counts it too.
func TestOOMKillReaderRealCgroupV1(t *testing.T) {
	const (
		mount    = "/sys/fs/cgroup"
		limitMiB = 32
		allocMiB = 128
	)
	if os.Geteuid() != 0 {
		t.Skip("creating cgroups needs root")
	}
	if _, err := os.Stat(filepath.Join(mount, "memory", "memory.usage_in_bytes")); err != nil {
		t.Skipf("no cgroup v1 memory controller at %s: %v", mount, err)
	}
	hierarchy := func() ([]cgroup1.Subsystem, error) { return []cgroup1.Subsystem{cgroup1.NewMemory(mount)}, nil }
	root := "/evictd-test-" + randomHex(t, 4)
	paths := []string{root, root + "/kubepods", root + "/kubepods/burstable", root + "/kubepods/burstable/pod" + randomUID(t)}
	var pod cgroup1.Cgroup
	for i, p := range paths {
		res := &specs.LinuxResources{}
		if i == len(paths)-1 {
			res.Memory = &specs.LinuxMemory{Limit: ptr(int64(limitMiB << 20))}
		}
		cg, err := cgroup1.New(cgroup1.StaticPath(p), res, cgroup1.WithHierarchy(hierarchy))
		t.Cleanup(func() { removeCgroup(t, mount, p) })
		if err != nil {
			t.Fatalf("create cgroup %s: %v", p, err)
		}
		pod = cg
	}
	cfg := Config{ProcRoot: "/proc", CgroupMount: mount, CgroupRoot: root, CgroupDriver: DriverCgroupfs, KubeletRootDir: t.TempDir()}
	vmstat := func() int64 {
		t.Helper()
		b, err := os.ReadFile("/proc/vmstat")
		if err != nil {
			t.Fatal(err)
		}
		n, err := parseOOMKill("/proc/vmstat", b)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	kernelBefore := vmstat()
	before, err := readOOMKills(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := before[signals.OOMScopeKubepods]; ok || before[signals.OOMScopeNode] < kernelBefore {
		t.Fatalf("before: got %v, want the node's count (at least %d) and no kubepods scope", before, kernelBefore)
	}

	child := testalloc.Start(t, t, allocEnv, allocMiB)
	if err := pod.AddProc(uint64(child.PID())); err != nil {
		t.Fatalf("move child into %s: %v", paths[3], err)
	}
	if err := child.TryAllocate(); err == nil {
		t.Fatalf("the child allocated %d MiB in a cgroup of %d MiB: want it OOM-killed", allocMiB, limitMiB)
	}
	child.Kill() // reaped: its cgroup may go

	after, err := readOOMKills(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kernelAfter := vmstat()
	if _, ok := after[signals.OOMScopeKubepods]; ok {
		t.Errorf("after: got a kubepods scope on cgroup v1: %v", after)
	}
	// Other work on this machine may be OOM-killed meanwhile: the count
	// read lies between the kernel's own before and after the kill.
	rose := after[signals.OOMScopeNode] - before[signals.OOMScopeNode]
	if rose < 1 || after[signals.OOMScopeNode] > kernelAfter {
		t.Errorf("node scope: %d -> %d (kernel %d -> %d), want a rise of at least 1 within the kernel's",
			before[signals.OOMScopeNode], after[signals.OOMScopeNode], kernelBefore, kernelAfter)
	}
	own := map[string]int64{}
	for _, p := range paths[1:] {
		own[p] = oomControlKills(t, filepath.Join(mount, "memory", p, "memory.oom_control"))
	}
	t.Logf("node scope %d -> %d (+%d); memory.oom_control oom_kill by cgroup: %v", before[signals.OOMScopeNode], after[signals.OOMScopeNode], rose, own)
	if own[paths[3]] != 1 || own[paths[1]] != 0 || own[paths[2]] != 0 {
		t.Errorf("memory.oom_control oom_kill: got %v, want 1 in the victim's cgroup (%s) and 0 in its parents", own, paths[3])
	}
}

// oomControlKills reads the oom_kill count of a v1 memory.oom_control.
func oomControlKills(t *testing.T, file string) int64 {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	n, err := parseOOMKill(file, b)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// BenchmarkOOMKillReader is the cost the loop adds to a housekeeping
// pass: this machine's /proc/vmstat and, on the cgroup v2 fixture,
// kubepods' memory.events too.
func BenchmarkOOMKillReader(b *testing.B) {
	for _, bc := range []struct{ name, proc, cgroup string }{
		{"this machine", "/proc", "/sys/fs/cgroup"},
		{"v2 fixture", "testdata/proc", "testdata/cgroupv2"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			proc, _ := filepath.Abs(bc.proc)
			cgroup, _ := filepath.Abs(bc.cgroup)
			r, err := NewOOMKillReader(Config{ProcRoot: proc, CgroupMount: cgroup, CgroupRoot: "/", CgroupDriver: DriverCgroupfs, KubeletRootDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.OOMKills(ctx, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package host

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/evictd/evictd/signals"
)

// TestPodSignallerRealCgroupV1 builds a pod in this machine's cgroup v1
// memory controller with a container (a shell that traps SIGTERM and its
// child), a sandbox (a process no container's ID names), CRI-O's conmon
// of the container in the pod's cgroup (conmon_cgroup "pod", the cgroupfs
// layout: crio-<id> and crio-conmon-<id>, conmon's listed first) and a
// process outside the pod, and checks that the container's main process
// alone gets the signal.
func TestPodSignallerRealCgroupV1(t *testing.T) {
	const mount = "/sys/fs/cgroup"
	if os.Geteuid() != 0 {
		t.Skip("creating cgroups needs root")
	}
	if _, err := os.Stat(filepath.Join(mount, "memory", "memory.usage_in_bytes")); err != nil {
		t.Skipf("no cgroup v1 memory controller at %s: %v", mount, err)
	}
	hierarchy := func() ([]cgroup1.Subsystem, error) {
		return []cgroup1.Subsystem{cgroup1.NewMemory(mount), cgroup1.NewPids(mount)}, nil
	}
	id, uid := randomHex(t, 4), randomUID(t)
	root := "/evictd-test-" + id
	podPath := root + "/kubepods/burstable/pod" + uid
	// An ID starting with f: its directory, crio-f…, sorts after
	// conmon's, crio-conmon-f….
	ctrID, sandboxID := "f"+randomHex(t, 32)[1:], randomHex(t, 32)
	ctrCgroup, conmonCgroup := podPath+"/crio-"+ctrID, podPath+"/crio-conmon-"+ctrID
	cgs := map[string]cgroup1.Cgroup{}
	for _, p := range []string{root, root + "/kubepods", root + "/kubepods/burstable", podPath, podPath + "/" + sandboxID, conmonCgroup, ctrCgroup} {
		cg, err := cgroup1.New(cgroup1.StaticPath(p), &specs.LinuxResources{}, cgroup1.WithHierarchy(hierarchy))
		t.Cleanup(func() { removeCgroup(t, mount, p) })
		if err != nil {
			t.Fatalf("create cgroup %s: %v", p, err)
		}
		cgs[p] = cg
	}
	// Processes still in a cgroup at the end are killed before the
	// cgroups go (cleanups run last first).
	t.Cleanup(func() {
		for _, p := range []string{ctrCgroup, conmonCgroup, podPath + "/" + sandboxID} {
			pids, _ := procs(filepath.Join(mount, "memory", p))
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})

	// The container's main process: a shell that exits 0 on SIGTERM,
	// with a child that ignores nothing (a SIGTERM would end it).
	term := filepath.Join(t.TempDir(), "term")
	main := exec.Command("sh", "-c", `trap 'echo term > "$1"; exit 0' TERM; read _; sleep 1000 & wait; wait`, "sh", term)
	stdin, err := main.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := main.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- main.Wait() }()
	if err := cgs[ctrCgroup].AddProc(uint64(main.Process.Pid)); err != nil {
		t.Fatal(err)
	}
	// Forked once in its cgroup: the child is there too.
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	sandbox := startSleep(t)
	if err := cgs[podPath+"/"+sandboxID].AddProc(uint64(sandbox.Process.Pid)); err != nil {
		t.Fatal(err)
	}
	conmon := startSleep(t)
	if err := cgs[conmonCgroup].AddProc(uint64(conmon.Process.Pid)); err != nil {
		t.Fatal(err)
	}
	outside := startSleep(t)
	ctrDir := filepath.Join(mount, "memory", ctrCgroup)
	var listed []int
	for deadline := time.Now().Add(5 * time.Second); len(listed) < 2 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if listed, err = procs(ctrDir); err != nil {
			t.Fatal(err)
		}
	}
	if len(listed) != 2 {
		t.Fatalf("the container's cgroup lists %v, want the shell and its child", listed)
	}

	s, err := NewPodSignaller(Config{ProcRoot: "/proc", CgroupMount: mount, CgroupRoot: root, CgroupDriver: DriverCgroupfs, KubeletRootDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	pod := signals.Pod{Namespace: "ns", Name: "p", UID: uid, QOS: signals.Burstable, Containers: []signals.Container{
		{Name: "app", ID: ctrID},
		{Name: "ended", ID: ""},           // not running: no ID
		{Name: "elsewhere", ID: "abcdef"}, // no cgroup of that ID
	}}
	began := time.Now()
	got, err := s.Signal(pod, syscall.SIGTERM)
	took := time.Since(began)
	if err != nil || got.Processes != 1 || got.Containers != 1 || !slices.Equal(got.Signals, []syscall.Signal{syscall.SIGTERM}) {
		t.Fatalf("Signal = %+v, %v; want SIGTERM to 1 process of 1 container", got, err)
	}
	t.Logf("signalled %+v in %s", got, took)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the main process did not exit 0 on its SIGTERM: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the container's main process did not get its SIGTERM")
	}
	if b, err := os.ReadFile(term); err != nil || strings.TrimSpace(string(b)) != "term" {
		t.Fatalf("the trap did not run: %q, %v", b, err)
	}
	for what, pid := range map[string]int{"the sandbox's process": sandbox.Process.Pid, "conmon": conmon.Process.Pid, "a process outside the pod": outside.Process.Pid} {
		if err := syscall.Kill(pid, 0); err != nil {
			t.Errorf("%s (%d) is gone: %v", what, pid, err)
		}
	}
	// The main process's child, left in the container, is no one's
	// child there any more: a second signal reaches it as a main process.
	left, err := procs(ctrDir)
	if err != nil || len(left) != 1 {
		t.Fatalf("the container's cgroup lists %v (%v), want the shell's child alone", left, err)
	}
	if got, err := s.Signal(pod, syscall.SIGKILL); err != nil || got.Processes != 1 {
		t.Fatalf("second Signal = %+v, %v; want the orphaned child", got, err)
	}

	// A pod none of whose containers has a process: ErrNoProcess.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if left, _ = procs(ctrDir); len(left) == 0 {
			break
		}
	}
	if _, err := s.Signal(pod, syscall.SIGTERM); !errors.Is(err, ErrNoProcess) {
		t.Fatalf("Signal of an empty container = %v, want ErrNoProcess", err)
	}
}

// startSleep starts a process that lives until the test ends.
func startSleep(t *testing.T) *exec.Cmd {
	t.Helper()
	c := exec.Command("sleep", "1000")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	return c
}

// TestSignalListedChecksTheCgroup: a process that its cgroup no longer
// lists once its pidfd is open (its PID reused by a process elsewhere)
// is not signalled.
func TestSignalListedChecksTheCgroup(t *testing.T) {
	p := startSleep(t)
	dir := t.TempDir()
	write := func(pids ...int) {
		var b strings.Builder
		for _, pid := range pids {
			b.WriteString(strconv.Itoa(pid) + "\n")
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(1)
	if ok, err := signalListed(listedProc{pid: p.Process.Pid, dir: dir}, syscall.SIGKILL); ok || err != nil {
		t.Fatalf("signalListed of an unlisted process = %v, %v; want not signalled", ok, err)
	}
	if err := syscall.Kill(p.Process.Pid, 0); err != nil {
		t.Fatalf("the unlisted process was signalled: %v", err)
	}
	write(p.Process.Pid)
	if ok, err := signalListed(listedProc{pid: p.Process.Pid, dir: dir}, syscall.Signal(0)); !ok || err != nil {
		t.Fatalf("signalListed of a listed process = %v, %v; want signalled", ok, err)
	}
}

// TestProcs: cgroup.procs as the kernel writes it, with the zeros of
// processes outside the reader's PID namespace, and a line that is not a
// PID named.
func TestProcs(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []int
		wantErr string
	}{
		{in: "", want: nil},
		{in: "12\n345\n", want: []int{12, 345}},
		{in: "0\n0\n7\n", want: []int{7}},
		{in: "12\nx\n", wantErr: `"x" is not a PID`},
		{in: "-3\n", wantErr: `"-3" is not a PID`},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(tc.in), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := procs(dir)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "cgroup.procs") {
				t.Errorf("procs(%q) error %v, want one naming cgroup.procs and %s", tc.in, err, tc.wantErr)
			}
		case err != nil || !slices.Equal(got, tc.want):
			t.Errorf("procs(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// TestPodSignallerEach: each container's main process gets the signal
// sigOf names for that container (its stop signal), in a cgroup v1 tree
// laid out in a temporary directory. The pod has no sandbox cgroup, as
// CRI-O leaves a pod with drop_infra_ctr (its default): only the
// containers' cgroups are looked for.
func TestPodSignallerEach(t *testing.T) {
	mount := t.TempDir()
	uid := randomUID(t)
	podDir := filepath.Join(mount, "memory", "kubepods", "burstable", "pod"+uid)
	if err := os.MkdirAll(podDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mount, "memory", "memory.usage_in_bytes"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := map[string]syscall.Signal{"quits": syscall.SIGUSR1, "terms": syscall.SIGUSR2}
	procsOf := map[string]*exec.Cmd{}
	var containers []signals.Container
	for name := range want {
		id := randomHex(t, 32)
		p := exec.Command("sleep", "1000")
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Process.Kill(); _ = p.Wait() })
		dir := filepath.Join(podDir, "crio-"+id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(p.Process.Pid)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		procsOf[name] = p
		containers = append(containers, signals.Container{Name: name, ID: id})
	}
	s, err := NewPodSignaller(Config{ProcRoot: "/proc", CgroupMount: mount, CgroupRoot: "/", CgroupDriver: DriverCgroupfs, KubeletRootDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	pod := signals.Pod{Namespace: "ns", Name: "p", UID: uid, QOS: signals.Burstable, Containers: containers}
	began := time.Now()
	got, err := s.SignalEach(pod, func(c signals.Container) syscall.Signal { return want[c.Name] })
	took := time.Since(began)
	// The first signal's time is within the call; the test cannot
	// know it better than that.
	if got.FirstAfter <= 0 || got.FirstAfter > took {
		t.Errorf("FirstAfter = %s, want within the call's %s", got.FirstAfter, took)
	}
	slices.Sort(got.Signals) // in the order of the containers, which want's map order made
	if err != nil || got.Processes != 2 || got.Containers != 2 || !slices.Equal(got.Signals, []syscall.Signal{syscall.SIGUSR1, syscall.SIGUSR2}) {
		t.Fatalf("SignalEach = %+v, %v; want SIGUSR1 and SIGUSR2 to 2 processes of 2 containers", got, err)
	}
	for name, p := range procsOf {
		_ = p.Wait()
		ws, ok := p.ProcessState.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != want[name] {
			t.Errorf("container %s's process ended %v, want by %v", name, p.ProcessState, want[name])
		}
	}
}

// TestSignalNames: the signals sent are named as images name them, the
// real-time ones from glibc's SIGRTMIN.
func TestSignalNames(t *testing.T) {
	tests := []struct {
		sigs []syscall.Signal
		want string
	}{
		{nil, ""},
		{[]syscall.Signal{syscall.SIGTERM}, "SIGTERM"},
		{[]syscall.Signal{syscall.SIGQUIT, syscall.SIGTERM}, "SIGQUIT,SIGTERM"},
		{[]syscall.Signal{syscall.Signal(37)}, "SIGRTMIN+3"},
		{[]syscall.Signal{syscall.Signal(33)}, "33"},
	}
	for _, tt := range tests {
		if got := (Signalled{Signals: tt.sigs}).SignalNames(); got != tt.want {
			t.Errorf("SignalNames of %v = %q, want %q", tt.sigs, got, tt.want)
		}
	}
}

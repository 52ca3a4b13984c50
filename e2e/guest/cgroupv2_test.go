package guest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/testing/testagent"
	"github.com/evictd/evictd/internal/testing/testalloc"
	"github.com/evictd/evictd/internal/testing/testvm"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/signals/host"
)

// guestEnv makes TestCgroupV2Guest run: it is set only in
// TestCgroupV2Node's guest.
const guestEnv = "EVICTD_VM_GUEST"

// TestCgroupV2Node boots a cgroup v2 guest (internal/testing/testvm) and
// runs TestCgroupV2Guest there (this test binary, which starts the evictd
// binary of $EVICTD_BIN): what evictd reads and arms on a real v2 kernel,
// with the cgroupfs and the systemd drivers' layouts.
func TestCgroupV2Node(t *testing.T) {
	testvm.Need(t)
	bin := testagent.Binary(t)
	res, err := testvm.Run(t.Context(), t.TempDir(), testvm.Options{
		Script:    "exec '" + os.Args[0] + "' -test.run '^TestCgroupV2Guest$' -test.v -test.count=1 -test.timeout 9m",
		Env:       []string{guestEnv + "=1", testagent.EnvBin + "=" + bin},
		MemoryMiB: 1536,
		Timeout:   11 * time.Minute,
	})
	if res != nil {
		t.Logf("guest booted in %s, powered off after %s; its test said:\n%s", res.Booted.Round(100*time.Millisecond), res.Took.Round(100*time.Millisecond), res.Output)
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || !strings.Contains(res.Output, "--- PASS: TestCgroupV2Guest") {
		t.Errorf("the guest's test failed (exit %d)", res.ExitCode)
	}
}

// TestCgroupV2Guest runs inside TestCgroupV2Node's guest, on the unified
// hierarchy at /sys/fs/cgroup, once per cgroup driver.
func TestCgroupV2Guest(t *testing.T) {
	if os.Getenv(guestEnv) != "1" {
		t.Skip("runs in TestCgroupV2Node's cgroup v2 guest")
	}
	v2Write(t, "/sys/fs/cgroup/cgroup.subtree_control", "+memory +pids")
	for _, driver := range []string{host.DriverCgroupfs, host.DriverSystemd} {
		t.Run(driver, func(t *testing.T) { v2Scenario(t, driver) })
	}
}

// v2Layout names the cgroups of the kubelet's layout for a driver.
type v2Layout struct{ driver string }

func (l v2Layout) kubepods() string {
	if l.driver == host.DriverSystemd {
		return "kubepods.slice"
	}
	return "kubepods"
}

func (l v2Layout) tier(qos signals.QOSClass) string {
	if qos == signals.Guaranteed {
		return l.kubepods()
	}
	t := strings.ToLower(string(qos))
	if l.driver == host.DriverSystemd {
		return l.kubepods() + "/kubepods-" + t + ".slice"
	}
	return l.kubepods() + "/" + t
}

func (l v2Layout) pod(qos signals.QOSClass, uid string) string {
	if l.driver == host.DriverSystemd {
		prefix := "kubepods-"
		if qos != signals.Guaranteed {
			prefix += strings.ToLower(string(qos)) + "-"
		}
		return l.tier(qos) + "/" + prefix + "pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
	}
	return l.tier(qos) + "/pod" + uid
}

func (l v2Layout) container(pod, id string) string {
	if l.driver == host.DriverSystemd {
		return pod + "/cri-containerd-" + id + ".scope"
	}
	return pod + "/" + id
}

// v2Scenario: two pods in real v2 cgroups; evictd's signals against the
// kernel's files; its PSI triggers and memory.events fired by a memory.high
// breach; then a hog crossing a hard threshold, chosen by the decision of a
// pass a wake-up source started.
func v2Scenario(t *testing.T, driver string) {
	const cg = "/sys/fs/cgroup"
	l := v2Layout{driver}
	mkdir := func(rel string, subtree bool) {
		dir := filepath.Join(cg, rel)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for i := 0; i < 50 && os.Remove(dir) != nil; i++ {
				time.Sleep(100 * time.Millisecond)
			}
		})
		if subtree {
			v2Write(t, filepath.Join(dir, "cgroup.subtree_control"), "+memory +pids")
		}
	}
	mkdir(l.kubepods(), true)
	v2Write(t, filepath.Join(cg, l.kubepods(), "memory.max"), strconv.Itoa(700<<20))
	mkdir(l.tier(signals.Burstable), true)
	mkdir(l.tier(signals.BestEffort), true)
	const steadyUID, hogUID = "0c0ffee0-0000-4000-8000-000000000001", "0c0ffee0-0000-4000-8000-000000000002"
	steady, hog := l.pod(signals.Burstable, steadyUID), l.pod(signals.BestEffort, hogUID)
	mkdir(steady, true)
	mkdir(hog, true)
	mkdir(l.container(steady, "a1"), false)
	mkdir(l.container(hog, "b1"), false)
	alloc := func(ctr string, mib int) *testalloc.Child {
		a := testalloc.Start(t, t, allocEnv, mib)
		a.MoveTo(t, filepath.Join(cg, ctr))
		a.Allocate(t)
		return a
	}
	alloc(l.container(steady, "a1"), 100)
	alloc(l.container(hog, "b1"), 150)

	addr := testagent.FreeAddr(t)
	rootDir := t.TempDir()
	// The image filesystem: another filesystem than the kubelet's root
	// (the guest's /run, a tmpfs; the root is an overlay), as a node with
	// a dedicated imagefs has.
	const imagefsDir = "/run"
	_, logs := testagent.Start(t, nil,
		"--cgroup-root=/", "--cgroup-driver="+driver,
		"--enforce-node-allocatable=pods",
		"--eviction-hard=allocatableMemory.available<300Mi",
		"--dry-run",
		// Passes between ticks come from the wake-up sources; the fast
		// poll runs from the start (450Mi available, within 250Mi of the
		// threshold).
		"--housekeeping-interval=1m",
		"--fast-poll-margin=250Mi",
		"--root-dir", rootDir,
		"--imagefs-path", imagefsDir,
		"--metrics-bind-address", addr,
		"--log-level=debug")
	testagent.WaitHTTP(t, "http://"+addr+"/readyz")
	for _, want := range []string{
		`PSI trigger \"some 150000 2000000\" on /proc/pressure/memory`,
		`PSI trigger \"some 150000 2000000\" on ` + filepath.Join(cg, l.kubepods(), "memory.pressure"),
		"memory.events of " + filepath.Join(cg, l.kubepods()),
		"fast poll every 250ms near a memory threshold",
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no wake-up source %q armed:\n%s", want, grepLines(logs.String(), "wake-up source"))
		}
	}

	// The signals, against the kernel's files read before and after.
	cfg := host.Config{ProcRoot: "/proc", CgroupMount: cg, CgroupRoot: "/", CgroupDriver: driver, KubeletRootDir: t.TempDir()}
	before := kernelSignals(t, cfg, l)
	st := v2Status(t, addr)
	after := kernelSignals(t, cfg, l)
	for _, s := range []signals.Signal{signals.MemoryAvailable, signals.AllocatableMemoryAvailable, signals.PIDAvailable} {
		o, ok := st.observation(s)
		// kubepods holds the allocators alone; the root's working set
		// also holds evictd and this test, which allocate between
		// evictd's pass and these reads: a few MiB, where another
		// reading of memory (MemAvailable, or the working set without
		// inactive_file) differs by tens or hundreds.
		slack := int64(2 << 20)
		switch s {
		case signals.PIDAvailable:
			slack = 10
		case signals.MemoryAvailable:
			slack = 8 << 20
		}
		lo, hi := min(before[s], after[s])-slack, max(before[s], after[s])+slack
		if !ok || o.Available < lo || o.Available > hi {
			t.Errorf("%s: evictd read %d (observed %t), the kernel's files give %d then %d", s, o.Available, ok, before[s], after[s])
		}
	}
	var nodefs, imagefs syscall.Statfs_t
	if err := syscall.Statfs(rootDir, &nodefs); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Statfs(imagefsDir, &imagefs); err != nil {
		t.Fatal(err)
	}
	for s, want := range map[signals.Signal]int64{
		signals.NodeFsAvailable:   int64(nodefs.Bavail) * nodefs.Bsize,
		signals.NodeFsInodesFree:  int64(nodefs.Ffree),
		signals.ImageFsAvailable:  int64(imagefs.Bavail) * imagefs.Bsize,
		signals.ImageFsInodesFree: int64(imagefs.Ffree),
	} {
		slack := int64(1 << 20)
		if s == signals.NodeFsInodesFree || s == signals.ImageFsInodesFree {
			slack = 100
		}
		if o, ok := st.observation(s); !ok || o.Available < want-slack || o.Available > want+slack {
			t.Errorf("%s: evictd read %d (observed %t), statfs gives %d", s, o.Available, ok, want)
		}
	}
	if o, _ := st.observation(signals.AllocatableMemoryAvailable); o.Capacity != 700<<20 {
		t.Errorf("allocatableMemory.available capacity %d, want kubepods' memory.max %d", o.Capacity, 700<<20)
	}

	// The pods, as evictd's pod source and stats reader find them.
	pods, err := host.DiscoverPods(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]signals.QOSClass{}
	for _, p := range pods {
		got[p.UID] = p.QOS
	}
	if len(got) != 2 || got[steadyUID] != signals.Burstable || got[hogUID] != signals.BestEffort {
		t.Errorf("pods found: %v, want %s Burstable and %s BestEffort", got, steadyUID, hogUID)
	}
	reader, err := host.NewPodStatsReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stats, err := reader.Read(t.Context(), pods, time.Now(), signals.PodMemory|signals.PodProcesses)
	if err != nil {
		t.Errorf("pod stats: %v", err)
	}
	for uid, dir := range map[string]string{steadyUID: steady, hogUID: hog} {
		ws := v2WorkingSet(t, filepath.Join(cg, dir))
		s := stats[uid]
		if s.MemoryWorkingSet == nil || *s.MemoryWorkingSet < ws-(2<<20) || *s.MemoryWorkingSet > ws+(2<<20) {
			t.Errorf("pod %s: working set %v, the kernel's files give %d", uid, s.MemoryWorkingSet, ws)
		}
		if s.Processes == nil || *s.Processes != testagent.ReadInt(t, filepath.Join(cg, dir, "pids.current")) {
			t.Errorf("pod %s: %v tasks, pids.current says %d", uid, s.Processes, testagent.ReadInt(t, filepath.Join(cg, dir, "pids.current")))
		}
	}

	// memory.high just above what kubepods uses: a new allocation is
	// throttled (a memory stall: both PSI triggers) and counted as a high
	// event (memory.events).
	kp := filepath.Join(cg, l.kubepods())
	v2Write(t, filepath.Join(kp, "memory.high"), strconv.FormatInt(testagent.ReadInt(t, filepath.Join(kp, "memory.current"))+(16<<20), 10))
	breach := alloc(l.container(steady, "a1"), 60)
	deadline := time.Now().Add(60 * time.Second)
	for {
		m := testagent.ParseMetrics(t, v2Get(t, addr, "/metrics"))
		if m[`evictd_wakeups_total{source="psi"}`] > 0 && m[`evictd_wakeups_total{source="memory-events"}`] > 0 {
			t.Logf("after the memory.high breach: wake-ups psi %v, memory-events %v, fast-poll %v; memory.events: %s",
				m[`evictd_wakeups_total{source="psi"}`], m[`evictd_wakeups_total{source="memory-events"}`],
				m[`evictd_wakeups_total{source="fast-poll"}`], strings.Fields(v2Read(t, filepath.Join(kp, "memory.events"))))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no PSI or memory.events wake-up within 60 s of a memory.high breach: %v; memory.events: %s; memory.pressure: %s",
				m, v2Read(t, filepath.Join(kp, "memory.events")), v2Read(t, filepath.Join(kp, "memory.pressure")))
		}
		time.Sleep(200 * time.Millisecond)
	}
	v2Write(t, filepath.Join(kp, "memory.high"), "max")
	breach.Kill()

	// The hog grows past the hard threshold: 100 + 150 + 200 MiB of 700,
	// about 250Mi available, under 300Mi.
	if st := v2Status(t, addr); st.Decision.Outcome != "none" {
		t.Fatalf("before the hog grows: decision %+v", st.Decision)
	}
	grown := time.Now()
	alloc(l.container(hog, "b1"), 200)
	var decided *v2StatusDoc
	for deadline := time.Now().Add(30 * time.Second); decided == nil; {
		if st := v2Status(t, addr); st.Decision.Pod != nil {
			decided = st
		} else if time.Now().After(deadline) {
			t.Fatalf("no decision naming a pod within 30 s of the hog's growth: %+v", st.Decision)
		} else {
			time.Sleep(100 * time.Millisecond)
		}
	}
	d := decided.Decision
	if d.Pod.UID != hogUID || d.Signal != signals.AllocatableMemoryAvailable || !d.Hard || d.Outcome != "evict" ||
		!strings.Contains(d.Reason, "allocatableMemory.available<300Mi") {
		t.Errorf("decision %+v (pod %+v), want the hog (%s) for the hard allocatableMemory.available threshold", d, *d.Pod, hogUID)
	}
	if decided.Trigger != "wake" && decided.Trigger != "deadline" {
		t.Errorf("the deciding pass was started by %q, want a wake-up source (the tick is a minute)", decided.Trigger)
	}
	// The source that woke the deciding pass: the last wake-up logged
	// before its decision line.
	var source string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "msg=woken") {
			source = line
		}
		if strings.Contains(line, "msg=decision") && strings.Contains(line, "outcome=evict") {
			break
		}
	}
	t.Logf("hog grown → decision %s (pass at %s, trigger %s, reason %q), woken by: %s", decided.Time.Sub(grown).Round(time.Millisecond),
		decided.Time.Format("15:04:05.000"), decided.Trigger, d.Reason, source)
	if !strings.Contains(source, "kind=") {
		t.Errorf("no wake-up logged before the decision:\n%s", grepLines(logs.String(), "woken", "decision"))
	}
}

// kernelSignals computes memory.available, allocatableMemory.available and
// pid.available from the kernel's files, as the kubelet defines them on
// cgroup v2: MemTotal less the hugepage pools (Hugetlb, kubelet 1.37) less
// the root's anon + file − inactive_file; kubepods' memory.max less its
// memory.current − inactive_file; min(pid_max, threads-max) less the tasks
// loadavg counts.
func kernelSignals(t *testing.T, cfg host.Config, l v2Layout) map[signals.Signal]int64 {
	t.Helper()
	var total, huge int64
	for _, line := range strings.Split(v2Read(t, "/proc/meminfo"), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "MemTotal:":
			total = v << 10
		case "Hugetlb:":
			huge = v << 10
		}
	}
	total -= huge
	root := v2Keyed(t, filepath.Join(cfg.CgroupMount, "memory.stat"))
	kp := filepath.Join(cfg.CgroupMount, l.kubepods())
	pidMax := min(testagent.ReadInt(t, "/proc/sys/kernel/pid_max"), testagent.ReadInt(t, "/proc/sys/kernel/threads-max"))
	load := strings.Fields(v2Read(t, "/proc/loadavg"))
	_, tasks, _ := strings.Cut(load[3], "/")
	n, _ := strconv.ParseInt(tasks, 10, 64)
	return map[signals.Signal]int64{
		signals.MemoryAvailable:            total - (root["anon"] + root["file"] - root["inactive_file"]),
		signals.AllocatableMemoryAvailable: testagent.ReadInt(t, filepath.Join(kp, "memory.max")) - v2WorkingSet(t, kp),
		signals.PIDAvailable:               pidMax - n,
	}
}

// workingSet is a v2 cgroup's memory.current less its inactive_file.
func v2WorkingSet(t *testing.T, dir string) int64 {
	return testagent.ReadInt(t, filepath.Join(dir, "memory.current")) - v2Keyed(t, filepath.Join(dir, "memory.stat"))["inactive_file"]
}

type v2StatusDoc struct {
	Time         time.Time `json:"time"`
	Trigger      string    `json:"trigger"`
	Observations []struct {
		Signal    signals.Signal `json:"signal"`
		Available int64          `json:"available"`
		Capacity  int64          `json:"capacity"`
	} `json:"observations"`
	Decision struct {
		Outcome string         `json:"outcome"`
		Reason  string         `json:"reason"`
		Signal  signals.Signal `json:"signal"`
		Hard    bool           `json:"hard"`
		Pod     *signals.Pod   `json:"pod"`
	} `json:"decision"`
}

func (s *v2StatusDoc) observation(sig signals.Signal) (struct {
	Signal    signals.Signal `json:"signal"`
	Available int64          `json:"available"`
	Capacity  int64          `json:"capacity"`
}, bool) {
	for _, o := range s.Observations {
		if o.Signal == sig {
			return o, true
		}
	}
	return s.Observations[0], false
}

func v2Status(t *testing.T, addr string) *v2StatusDoc {
	t.Helper()
	var st v2StatusDoc
	if err := json.Unmarshal([]byte(v2Get(t, addr, "/status")), &st); err != nil {
		t.Fatalf("/status: %v", err)
	}
	return &st
}

var client = &http.Client{Timeout: 10 * time.Second}

func v2Get(t *testing.T, addr, path string) string {
	t.Helper()
	resp, err := client.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", path, resp.Status, err)
	}
	return string(body)
}

func v2Write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func v2Read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// v2Keyed reads a flat keyed file ("key value" lines: memory.events,
// memory.stat, /proc/vmstat); a line of another form fails the test.
func v2Keyed(t *testing.T, path string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, line := range strings.Split(v2Read(t, path), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			t.Fatalf("%s: line %q", path, line)
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out[f[0]] = v
	}
	return out
}

// grepLines returns the lines of s holding any of subs.
func grepLines(s string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if slices.ContainsFunc(subs, func(sub string) bool { return strings.Contains(l, sub) }) {
			out = append(out, l)
		}
	}
	return fmt.Sprint(strings.Join(out, "\n"))
}

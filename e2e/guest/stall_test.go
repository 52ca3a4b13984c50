package guest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/testing/childproc"
	"github.com/evictd/evictd/internal/testing/testalloc"
	"github.com/evictd/evictd/internal/testing/testvm"
)

// stallGuestEnv makes TestStallIsNotShortageGuest run: it is set only in
// TestStallIsNotShortage's guest.
const stallGuestEnv = "EVICTD_STALL_GUEST"

// binEnv names the evictd binary to run in the guest (`make build`'s).
const binEnv = "EVICTD_BIN"

// TestStallIsNotShortage boots a cgroup v2 guest and runs
// TestStallIsNotShortageGuest there, with the evictd binary of $EVICTD_BIN.
func TestStallIsNotShortage(t *testing.T) {
	testvm.Need(t)
	bin := os.Getenv(binEnv)
	switch {
	case bin == "" && os.Getenv("CI") == "true":
		t.Fatalf("$%s is not set (make build, then EVICTD_BIN=$PWD/bin/evictd)", binEnv)
	case bin == "":
		t.Skipf("$%s is not set (make build, then EVICTD_BIN=$PWD/bin/evictd)", binEnv)
	case !filepath.IsAbs(bin):
		t.Fatalf("$%s=%q: want an absolute path (the guest sees the host's root)", binEnv, bin)
	}
	res, err := testvm.Run(t.Context(), t.TempDir(), testvm.Options{
		Script:    "exec '" + os.Args[0] + "' -test.run '^TestStallIsNotShortageGuest$' -test.v -test.count=1 -test.timeout 12m",
		Env:       []string{stallGuestEnv + "=1", binEnv + "=" + bin},
		MemoryMiB: 1536,
		Timeout:   14 * time.Minute,
	})
	if res != nil {
		t.Logf("guest booted in %s, powered off after %s; its test said:\n%s", res.Booted.Round(100*time.Millisecond), res.Took.Round(100*time.Millisecond), res.Output)
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || !strings.Contains(res.Output, "--- PASS: TestStallIsNotShortageGuest") {
		t.Errorf("the guest's test failed (exit %d)", res.ExitCode)
	}
}

// The guest's node: kubepods limited to 600 MiB (allocatable), 100 MiB of
// it held idle by one pod, and a container of another held at a memory.high
// of 32 MiB by a loop that writes 48 MiB to a tmpfs file and removes it,
// again and again. With no swap the kernel cannot reclaim those pages: the
// writer is throttled at every write above 32 MiB, which the node's PSI
// counts as a memory stall, while the node has over a GiB free.
const (
	kubepodsMax  = 600 << 20
	idleMiB      = 100
	throttledMax = 32 << 20
	writeMiB     = 48
	hogMiB       = 380
	// stallFor is how long the throttled container runs beside the idle
	// memory before the shortage: the issue asks for at least 2 minutes.
	stallFor = 130 * time.Second
	// The thresholds: a stall threshold the throttled container crosses,
	// and quantities it stays far from until the hog comes.
	thresholdsFlag = "--eviction-hard=memory.available<100Mi,allocatableMemory.available<150Mi,memory.pressure.some.avg10>5"
)

// TestStallIsNotShortageGuest runs inside TestStallIsNotShortage's guest:
// the stall alone for stallFor (no eviction, no memory pressure), then a
// shortage of allocatable memory (an eviction), then the stall corroborated
// by kubepods held at its own limit (the stall threshold acts).
func TestStallIsNotShortageGuest(t *testing.T) {
	if os.Getenv(stallGuestEnv) != "1" {
		t.Skip("runs in TestStallIsNotShortage's cgroup v2 guest")
	}
	const cg = "/sys/fs/cgroup"
	v2Write(t, filepath.Join(cg, "cgroup.subtree_control"), "+memory +pids")
	mkdir := func(rel string, subtree bool) string {
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
		return dir
	}
	kubepods := mkdir("kubepods", true)
	v2Write(t, filepath.Join(kubepods, "memory.max"), strconv.Itoa(kubepodsMax))
	mkdir("kubepods/burstable", true)
	mkdir("kubepods/besteffort", true)
	const throttledUID, idleUID, hogUID = "57a11000-0000-4000-8000-000000000001", "57a11000-0000-4000-8000-000000000002", "57a11000-0000-4000-8000-000000000003"
	mkdir("kubepods/burstable/pod"+throttledUID, true)
	ctr := mkdir("kubepods/burstable/pod"+throttledUID+"/c1", false)
	mkdir("kubepods/besteffort/pod"+idleUID, true)
	idleCtr := mkdir("kubepods/besteffort/pod"+idleUID+"/i1", false)
	mkdir("kubepods/besteffort/pod"+hogUID, true)
	hogCtr := mkdir("kubepods/besteffort/pod"+hogUID+"/h1", false)

	idle := testalloc.Start(t, t, allocEnv, idleMiB)
	idle.MoveTo(t, idleCtr)
	idle.Allocate(t)

	addr := freeAddr(t)
	bin := os.Getenv(binEnv)
	logPath := filepath.Join(t.TempDir(), "evictd.log")
	agent, err := childproc.Start("evictd", bin, []string{
		"--cgroup-root=/", "--cgroup-driver=cgroupfs",
		"--enforce-node-allocatable=pods",
		thresholdsFlag,
		"--dry-run",
		"--root-dir", t.TempDir(),
		"--metrics-bind-address", addr,
	}, logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = agent.Stop(5 * time.Second)
		if t.Failed() {
			t.Logf("evictd's log:\n%s", childproc.Tail(logPath, 80))
		}
	})
	waitReady(t, addr, agent)

	before := readCounters(t, kubepods, ctr)
	v2Write(t, filepath.Join(ctr, "memory.high"), strconv.Itoa(throttledMax))
	startThrottled(t, ctr, writeMiB)

	// Phase 1: the stall alone, for stallFor.
	start := time.Now()
	var samples, stalled int
	var maxSome float64
	var failures []string
	fail := func(format string, args ...any) {
		if len(failures) < 5 {
			failures = append(failures, fmt.Sprintf(format, args...))
		}
	}
	for time.Since(start) < stallFor {
		time.Sleep(5 * time.Second)
		m := metrics(t, addr)
		st := status(t, addr)
		psi := readPSI(t, "/proc/pressure/memory")
		ctrPSI := readPSI(t, filepath.Join(ctr, "memory.pressure"))
		now := readCounters(t, kubepods, ctr)
		gauge := m[`evictd_memory_pressure_stall_ratio{kind="some",window="10s"}`]
		t.Logf("+%3.0fs node PSI some avg10 %5.2f%% (evictd saw %5.2f%%), full avg10 %5.2f%%; container PSI some avg10 %5.2f%%; container memory.events high %d; %s; evictions %v, memory pressure %v, stall threshold met %v, PSI wake-ups %v; decision %s: %s",
			time.Since(start).Seconds(), psi.someAvg10, 100*gauge, psi.fullAvg10, ctrPSI.someAvg10, now.ctrHigh, now.node(before),
			sum(m, "evictd_evictions_not_issued_total"), m[`evictd_node_pressure{pressure="memory"}`],
			m[`evictd_threshold_met{kind="hard",signal="memory.pressure.some.avg10"}`], m[`evictd_wakeups_total{source="psi"}`],
			st.Decision.Outcome, st.Decision.Reason)
		if time.Since(start) > 20*time.Second {
			samples++
			if gauge > 0.05 {
				stalled++
			}
		}
		maxSome = max(maxSome, gauge)
		// In dry-run a decision to evict counts as not issued, reason
		// dry-run; an eviction issued would be a bug of its own.
		if n := sum(m, "evictd_evictions_total") + sum(m, "evictd_evictions_not_issued_total"); n != 0 {
			fail("+%.0fs: %v evictions (not issued: %s; issued: %s), decision %q: the throttled container's stall evicted", time.Since(start).Seconds(), n,
				series(m, "evictd_evictions_not_issued_total"), series(m, "evictd_evictions_total"), st.Decision.Reason)
		}
		if m[`evictd_node_pressure{pressure="memory"}`] != 0 || st.Pressures["memory"] {
			fail("+%.0fs: memory pressure reported (metric %v, /status %v) for a stall alone", time.Since(start).Seconds(), m[`evictd_node_pressure{pressure="memory"}`], st.Pressures["memory"])
		}
		if st.Decision.Outcome != "none" {
			fail("+%.0fs: decision %s: %s", time.Since(start).Seconds(), st.Decision.Outcome, st.Decision.Reason)
		}
	}
	after := readCounters(t, kubepods, ctr)
	m := metrics(t, addr)
	t.Logf("after %s of the throttled container: evictd's stall some.avg10 above 5%% in %d of %d samples (max %.2f%%); container memory.events high %d → %d; %s; PSI wake-ups %v, passes %s",
		time.Since(start).Round(time.Second), stalled, samples, 100*maxSome, before.ctrHigh, after.ctrHigh, after.node(before),
		m[`evictd_wakeups_total{source="psi"}`], series(m, "evictd_passes_total"))
	for _, f := range failures {
		t.Error(f)
	}
	// What the scenario needs, or it proves nothing.
	if stalled*2 < samples {
		t.Errorf("the node's memory stall (some.avg10 as evictd read it) was above the 5%% threshold in only %d of %d samples: the scenario did not stall the node", stalled, samples)
	}
	if after.ctrHigh <= before.ctrHigh {
		t.Errorf("the container's memory.events high stayed at %d: it was never held at its memory.high", after.ctrHigh)
	}
	if m[`evictd_wakeups_total{source="psi"}`] == 0 {
		t.Errorf("no PSI wake-up in %s of stall: %s", stallFor, series(m, "evictd_wakeups_total"))
	}
	if after.pgscan != before.pgscan || after.kubepodsHigh != before.kubepodsHigh || after.kubepodsMax != before.kubepodsMax {
		t.Errorf("the node itself reclaimed or kubepods hit its own limit (%s): the stall was not the container's alone", after.node(before))
	}
	// The reason is logged when it changes, not at every pass.
	logged := strings.Count(v2Read(t, logPath), "but local")
	t.Logf("decision lines saying the stall is local: %d, in %v passes", logged, sum(m, "evictd_passes_total"))
	if logged == 0 || logged > 5 {
		t.Errorf("evictd logged %d decision lines saying the stall is local in %v passes, want it said once when it starts (at most a few times)", logged, sum(m, "evictd_passes_total"))
	}

	// Phase 2: a real shortage, the throttled container still stalling:
	// the hog brings kubepods within 150Mi of its limit.
	hog := testalloc.Start(t, t, allocEnv, hogMiB)
	hog.MoveTo(t, hogCtr)
	grown := time.Now()
	hog.Allocate(t)
	var decided *statusDoc
	for deadline := time.Now().Add(90 * time.Second); decided == nil; {
		if st := status(t, addr); st.Decision.Pod != nil {
			decided = st
		} else if time.Now().After(deadline) {
			t.Fatalf("no decision to evict within 90 s of the hog: decision %s: %s", st.Decision.Outcome, st.Decision.Reason)
		} else {
			time.Sleep(500 * time.Millisecond)
		}
	}
	d := decided.Decision
	if d.Outcome != "evict" || d.Pod.UID != hogUID || d.Signal != "allocatableMemory.available" {
		t.Errorf("decision %s for %s (pod %s), want evict for allocatableMemory.available of the hog %s: %s", d.Outcome, d.Signal, d.Pod.UID, hogUID, d.Reason)
	}
	var dryRun float64
	for deadline := time.Now().Add(30 * time.Second); dryRun == 0 && time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		dryRun = metrics(t, addr)[`evictd_evictions_not_issued_total{eviction_signal="allocatableMemory.available",reason="dry-run"}`]
	}
	if dryRun == 0 {
		t.Errorf("the decision to evict was not counted in evictd_evictions_not_issued_total{reason=\"dry-run\"}: %s", series(metrics(t, addr), "evictd_evictions_not_issued_total"))
	}
	end := readCounters(t, kubepods, ctr)
	psi := readPSI(t, "/proc/pressure/memory")
	t.Logf("shortage: decision %s after %s: %s; pressures %v; node PSI some avg10 %.2f%%; %s; evictions %s",
		d.Outcome, decided.Time.Sub(grown).Round(time.Millisecond), d.Reason, decided.Pressures, psi.someAvg10, end.node(before), series(metrics(t, addr), "evictd_evictions_not_issued_total"))

	// Phase 3: the same stall, corroborated. The hog goes, and kubepods'
	// memory.high is set below what the idle pod alone holds, so every
	// charge in kubepods is over the pods' parent's own limit: kubepods'
	// memory.events.local high rises, the stall is the node's (its pods
	// as a whole are short), and the stall threshold is met. (kubepods at
	// its memory.max would be the same signal, but in this guest, with no
	// swap and no page cache to reclaim, an OOM kill.)
	hog.Kill()
	v2Write(t, filepath.Join(kubepods, "memory.high"), strconv.Itoa(idleMiB<<20))
	corroborated := time.Now()
	var stallDecided *statusDoc
	for deadline := time.Now().Add(60 * time.Second); stallDecided == nil; {
		if st := status(t, addr); st.Decision.Signal == "memory.pressure.some.avg10" && st.Decision.Pod != nil {
			stallDecided = st
		} else if time.Now().After(deadline) {
			t.Fatalf("no decision for the stall threshold within 60 s of kubepods held at its own memory.high (%s): decision %s for %q: %s",
				readCounters(t, kubepods, ctr).node(before), st.Decision.Outcome, st.Decision.Signal, st.Decision.Reason)
		} else {
			time.Sleep(500 * time.Millisecond)
		}
	}
	m = metrics(t, addr)
	if local := m[`evictd_memory_pressure_stall_local{kind="some",window="10s"}`]; local != 0 {
		t.Errorf("evictd_memory_pressure_stall_local{some,10s} = %v after kubepods' own high events, want 0", local)
	}
	last := readCounters(t, kubepods, ctr)
	if last.kubepodsHigh <= end.kubepodsHigh {
		t.Errorf("kubepods' memory.events.local high stayed at %d", last.kubepodsHigh)
	}
	t.Logf("kubepods held at its own memory.high: decision %s after %s: %s; %s; evictions %s",
		stallDecided.Decision.Outcome, stallDecided.Time.Sub(corroborated).Round(time.Millisecond), stallDecided.Decision.Reason, last.node(before),
		series(m, "evictd_evictions_not_issued_total"))
}

// startThrottled runs, in the container cgroup ctr, a shell that writes a
// file of mib MiB to a tmpfs and removes it, in a loop, until the test
// ends; it and its dd are one process group, killed by its ID.
func startThrottled(t *testing.T, ctr string, mib int) {
	t.Helper()
	dir, err := os.MkdirTemp("/run", "stall")
	if err != nil {
		t.Fatal(err)
	}
	script := `echo $$ > "$1/cgroup.procs" || exit 1
while :; do dd if=/dev/zero of="$2/f" bs=1M count="$3" 2>/dev/null; rm -f "$2/f"; done`
	cmd := exec.Command("/bin/sh", "-c", script, "throttled", ctr, dir, strconv.Itoa(mib))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
	})
}

// counters are the kernel's counts that tell a node's shortage from a
// cgroup held at its own limit.
type counters struct {
	pgscan                    int64 // /proc/vmstat pgscan_kswapd + pgscan_direct
	kubepodsHigh, kubepodsMax int64 // kubepods' memory.events.local
	ctrHigh                   int64 // the container's memory.events high
}

func readCounters(t *testing.T, kubepods, ctr string) counters {
	t.Helper()
	vm := v2Keyed(t, "/proc/vmstat")
	local := v2Keyed(t, filepath.Join(kubepods, "memory.events.local"))
	return counters{
		pgscan:       vm["pgscan_kswapd"] + vm["pgscan_direct"],
		kubepodsHigh: local["high"], kubepodsMax: local["max"],
		ctrHigh: v2Keyed(t, filepath.Join(ctr, "memory.events"))["high"],
	}
}

// node says how the node's counters moved since b.
func (c counters) node(b counters) string {
	return fmt.Sprintf("vmstat pgscan_kswapd+pgscan_direct %d → %d, kubepods memory.events.local high %d → %d, max %d → %d",
		b.pgscan, c.pgscan, b.kubepodsHigh, c.kubepodsHigh, b.kubepodsMax, c.kubepodsMax)
}

type psiLine struct{ someAvg10, fullAvg10 float64 }

func readPSI(t *testing.T, path string) psiLine {
	t.Helper()
	var p psiLine
	for _, line := range strings.Split(v2Read(t, path), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[1], "avg10=") {
			t.Fatalf("%s: line %q", path, line)
		}
		v, err := strconv.ParseFloat(strings.TrimPrefix(f[1], "avg10="), 64)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch f[0] {
		case "some":
			p.someAvg10 = v
		case "full":
			p.fullAvg10 = v
		}
	}
	return p
}

// statusDoc is what this test reads of evictd's /status.
type statusDoc struct {
	Time      time.Time       `json:"time"`
	Pressures map[string]bool `json:"pressures"`
	Decision  struct {
		Outcome string `json:"outcome"`
		Reason  string `json:"reason"`
		Signal  string `json:"signal"`
		Pod     *struct {
			UID string `json:"UID"`
		} `json:"pod"`
	} `json:"decision"`
}

func status(t *testing.T, addr string) *statusDoc {
	t.Helper()
	var st statusDoc
	if err := json.Unmarshal([]byte(v2Get(t, addr, "/status")), &st); err != nil {
		t.Fatalf("/status: %v", err)
	}
	return &st
}

// metrics returns every sample of /metrics by its series ("name{labels}").
func metrics(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(v2Get(t, addr, "/metrics")))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		m[line[:i]] = v
	}
	return m
}

// sum adds the samples of every series of the metric name.
func sum(m map[string]float64, name string) float64 {
	var s float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			s += v
		}
	}
	return s
}

// series prints the series of the metric name whose value is not 0.
func series(m map[string]float64, name string) string {
	var out []string
	for k, v := range m {
		if v != 0 && (k == name || strings.HasPrefix(k, name+"{")) {
			out = append(out, fmt.Sprintf("%s %v", strings.TrimPrefix(k, name), v))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// waitReady polls /readyz until evictd answers 200, failing at once if it
// exits.
func waitReady(t *testing.T, addr string, p *childproc.Process) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if p.Exited() {
			t.Fatal(p.ExitError())
		}
		resp, err := client.Get("http://" + addr + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("evictd did not answer /readyz with 200 within 60 s (last error %v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

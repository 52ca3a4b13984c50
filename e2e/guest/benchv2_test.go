package guest

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/testing/testagent"
	"github.com/evictd/evictd/internal/testing/testruntime"
	"github.com/evictd/evictd/internal/testing/testvm"
)

// The v2 detection benchmark (`make bench-v2`): how soon evictd decides
// after a memory threshold is crossed on a real cgroup v2 kernel, against
// the kubelet's model on v2 (no memcg notification there, kubernetes#106331:
// one look every 10 s). The guest runs under TCG, s times slower than this
// machine at touching new memory (measured on both at the start), so the
// memory of the native scenario is scaled by 1/s: the allocation rate and
// the headroom between the threshold and the kubepods limit. Time is not
// scaled: the headroom lasts as long as it does natively, so as many of
// the kubelet's 10 s periods, and evictd runs with its defaults. Its CPU
// work is s times slower than natively, which counts against it. Results
// are shares of the time the headroom lasts, never times to compare with
// native ones.
const (
	// benchV2Env holds the runs per rate; without it the benchmark skips.
	benchV2Env = "EVICTD_BENCH_V2"
	// benchV2GuestEnv is set in the guest: the host's time to touch
	// benchTouchMiB of new memory, in nanoseconds.
	benchV2GuestEnv = "EVICTD_BENCH_V2_HOST_TOUCH"
	// benchV2Workload is the workload binary (hack/workload) in the guest.
	benchV2Workload = "EVICTD_BENCH_V2_WORKLOAD"
	benchTouchMiB   = 256
	// benchLimitMiB is the guest's kubepods limit.
	benchLimitMiB = 700
	// benchNativeHeadroomMiB is the native scenario's headroom: the
	// e2e's hard threshold (500Mi), which 200 MiB/s uses up in 2.5 s, a
	// quarter of the kubelet's period.
	benchNativeHeadroomMiB = 500
	// kubeletPeriod is the kubelet's eviction monitoring period.
	kubeletPeriod = 10 * time.Second
)

// benchNativeRates are the native allocation rates the scaled ones stand
// for, in MiB/s: those of bench-node.
var benchNativeRates = []int{200, 800}

// TestBenchV2 boots a cgroup v2 guest and runs TestBenchV2Guest there. It
// asserts nothing about time; it prints a table.
func TestBenchV2(t *testing.T) {
	if os.Getenv(benchV2Env) == "" {
		t.Skip("a benchmark: make bench-v2 runs it")
	}
	testvm.Need(t)
	bin := testagent.Binary(t)
	workload, err := testruntime.WorkloadBinary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	touch := testvm.TouchTime(benchTouchMiB)
	t.Logf("this machine touches %d MiB of new memory in %s", benchTouchMiB, touch.Round(time.Millisecond))
	res, err := testvm.Run(t.Context(), t.TempDir(), testvm.Options{
		Script: "exec '" + os.Args[0] + "' -test.run '^TestBenchV2Guest$' -test.v -test.count=1 -test.timeout 50m",
		Env: []string{
			benchV2Env + "=" + os.Getenv(benchV2Env),
			benchV2GuestEnv + "=" + strconv.FormatInt(int64(touch), 10),
			benchV2Workload + "=" + workload,
			testagent.EnvBin + "=" + bin,
		},
		MemoryMiB: 1536,
		Timeout:   55 * time.Minute,
	})
	if res != nil {
		t.Logf("guest booted in %s, powered off after %s; it said:\n%s", res.Booted.Round(100*time.Millisecond), res.Took.Round(100*time.Millisecond), res.Output)
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Errorf("the guest's benchmark failed (exit %d)", res.ExitCode)
	}
}

// benchRun is what one run measured.
type benchRun struct {
	crossed, decided, oom time.Time
	// source is the kind of the last wake-up logged before the decision,
	// or "tick" when none came after the crossing.
	source string
}

// TestBenchV2Guest runs in TestBenchV2's guest: evictd standalone in
// dry-run, with its defaults (10 s housekeeping, PSI triggers,
// memory.events, the adaptive fast poll), and one BestEffort hog per run
// that crosses the hard threshold at the scaled rate and grows on to the
// kubepods limit, where the kernel's OOM killer ends it.
func TestBenchV2Guest(t *testing.T) {
	hostTouch, _ := strconv.ParseInt(os.Getenv(benchV2GuestEnv), 10, 64)
	if hostTouch <= 0 {
		t.Skip("runs in TestBenchV2's guest")
	}
	reps, err := strconv.Atoi(os.Getenv(benchV2Env))
	if err != nil || reps < 1 {
		t.Fatalf("%s=%q: want a number of runs", benchV2Env, os.Getenv(benchV2Env))
	}
	workload := os.Getenv(benchV2Workload)
	guestTouch := testvm.TouchTime(benchTouchMiB)
	s := float64(guestTouch) / float64(hostTouch)
	t.Logf("the guest touches %d MiB of new memory in %s: slowdown s = %.1f", benchTouchMiB, guestTouch.Round(time.Millisecond), s)

	const cg = "/sys/fs/cgroup"
	v2Write(t, filepath.Join(cg, "cgroup.subtree_control"), "+memory +pids")
	kp := filepath.Join(cg, "kubepods")
	for _, d := range []string{kp, filepath.Join(kp, "besteffort")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		v2Write(t, filepath.Join(d, "cgroup.subtree_control"), "+memory +pids")
	}
	v2Write(t, filepath.Join(kp, "memory.max"), strconv.Itoa(benchLimitMiB<<20))
	headroomMiB := max(1, int(math.Round(benchNativeHeadroomMiB/s)))
	addr := "127.0.0.1:19851"
	_, logs := testagent.Start(t, nil,
		"--cgroup-root=/", "--cgroup-driver=cgroupfs",
		"--enforce-node-allocatable=pods",
		fmt.Sprintf("--eviction-hard=allocatableMemory.available<%dMi", headroomMiB),
		"--dry-run",
		"--root-dir", t.TempDir(),
		"--metrics-bind-address", addr,
		"--log-level=debug") // the wake-ups
	testagent.WaitHTTP(t, "http://"+addr+"/readyz")

	var b strings.Builder
	fmt.Fprintf(&b, "\nslowdown s = %.1f; headroom %d MiB (%d natively) below a kubepods limit of %d MiB\n\n", s, headroomMiB, benchNativeHeadroomMiB, benchLimitMiB)
	b.WriteString("| native MiB/s | guest MiB/s | headroom lasts (kubelet periods) | runs | evictd: crossing → decision as a share of the headroom, median / p99 | evictd decided before the limit | deciding pass woken by | kubelet's 10 s polling model: median / p99 | model: decides before the limit |\n|---:|---:|---:|---:|---:|---:|---|---:|---:|\n")
	for _, native := range benchNativeRates {
		rate := max(1, int(math.Round(float64(native)/s)))
		headroom := time.Duration(float64(headroomMiB) / float64(rate) * float64(time.Second))
		var shares []float64
		before := 0
		sources := map[string]int{}
		for i := range reps {
			r := benchOnce(t, workload, kp, i, rate, headroomMiB, logs)
			if r.crossed.IsZero() || r.decided.IsZero() || r.decided.Before(r.crossed.Add(-time.Second)) {
				t.Errorf("rate %d run %d: crossed %v, decided %v", rate, i, r.crossed, r.decided)
				continue
			}
			share := float64(r.decided.Sub(r.crossed)) / float64(headroom)
			shares = append(shares, share)
			if r.oom.IsZero() || r.decided.Before(r.oom) {
				before++
			}
			sources[r.source]++
			t.Logf("rate %d MiB/s run %d: crossing → decision %s (%.3f of the headroom, woken by %s), OOM kill %s after the crossing",
				rate, i, r.decided.Sub(r.crossed).Round(time.Millisecond), share, r.source, r.oom.Sub(r.crossed).Round(time.Millisecond))
		}
		slices.Sort(shares)
		// The model: the kubelet looks once a period, at a phase that has
		// nothing to do with the crossing, so its delay is uniform on
		// [0, period): median period/2, p99 0.99·period; it decides before
		// the limit when the look comes within the headroom.
		ratio := float64(kubeletPeriod) / float64(headroom)
		var woken []string
		for _, k := range slices.Sorted(maps.Keys(sources)) {
			woken = append(woken, fmt.Sprintf("%s %d", k, sources[k]))
		}
		fmt.Fprintf(&b, "| %d | %d | %s (%.3f) | %d | %s / %s | %d/%d | %s | %.2f / %.2f | %.0f%% |\n",
			native, rate, headroom.Round(10*time.Millisecond), 1/ratio, len(shares),
			fmtShare(quantile(shares, 0.5)), fmtShare(quantile(shares, 0.99)), before, len(shares),
			strings.Join(woken, ", "), 0.5*ratio, 0.99*ratio, 100*min(1, 1/ratio))
	}
	t.Logf("the table (%d runs per rate):%s", reps, b.String())
}

func fmtShare(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// quantile is the nearest-rank quantile of sorted values.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// benchOnce runs one hog in a new pod cgroup under kp: a base allocated at
// once, two seconds of growth short of the threshold, then growth at rate
// to past the limit. A sampler reads kubepods every 5 ms for the crossing
// and the OOM kill; evictd's decision is its first decision line naming
// the pod.
func benchOnce(t *testing.T, workload, kp string, run, rate, headroomMiB int, logs *testagent.Log) benchRun {
	// The last run's hog must be gone from kubepods' memory: its
	// remains would meet the threshold during this run's base allocation.
	for i := 0; testagent.ReadInt(t, filepath.Join(kp, "memory.current")) > 16<<20; i++ {
		if i == 300 {
			t.Fatalf("kubepods still holds %d bytes 30 s after the last run", testagent.ReadInt(t, filepath.Join(kp, "memory.current")))
		}
		time.Sleep(100 * time.Millisecond)
	}
	uid := fmt.Sprintf("0c0ffee0-0000-4000-8000-%012d", 100+run+1000*rate)
	pod := filepath.Join(kp, "besteffort", "pod"+uid)
	ctr := filepath.Join(pod, "c"+strconv.Itoa(run))
	if err := os.Mkdir(pod, 0o755); err != nil {
		t.Fatal(err)
	}
	v2Write(t, filepath.Join(pod, "cgroup.subtree_control"), "+memory +pids")
	if err := os.Mkdir(ctr, 0o755); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, d := range []string{ctr, pod} {
			for i := 0; i < 100 && os.Remove(d) != nil; i++ {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()
	logStart := len(logs.String())
	base := benchLimitMiB - headroomMiB - 2*rate
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	hog := exec.CommandContext(ctx, "/bin/sh", "-c", `echo $$ > "$1/cgroup.procs" && exec "$2" alloc --base "$3" --mib "$4" --rate "$5"`,
		"hog", ctr, workload, strconv.Itoa(base), strconv.Itoa(benchLimitMiB+100), strconv.Itoa(rate))
	if err := hog.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = hog.Wait(); close(exited) }()
	defer func() { _ = hog.Process.Kill(); <-exited }()

	var r benchRun
	ooms := v2Keyed(t, filepath.Join(kp, "memory.events"))["oom_kill"]
	limit := int64(benchLimitMiB) << 20
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for r.oom.IsZero() {
		select {
		case <-ctx.Done():
			t.Errorf("run %d at %d MiB/s: no OOM kill within 3 minutes", run, rate)
			return r
		case <-exited:
			if r.oom.IsZero() {
				r.oom = time.Now()
			}
		case now := <-tick.C:
			if r.crossed.IsZero() && limit-v2WorkingSet(t, kp) < int64(headroomMiB)<<20 {
				r.crossed = now
			}
			if v2Keyed(t, filepath.Join(kp, "memory.events"))["oom_kill"] > ooms {
				r.oom = now
			}
		}
	}
	// The decision line may come after the kill: wait for it a while.
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if at, woken, kind, ok := decisionAt(logs.String()[logStart:], uid); ok {
			r.decided, r.source = at, kind
			if woken.Before(r.crossed.Add(-50 * time.Millisecond)) { // the sampler reads every 5 ms
				r.source = "tick"
			}
			break
		}
	}
	return r
}

// decisionAt returns the time of the first decision line in log that names
// the pod uid, and the time and kind of the last wake-up logged before it.
func decisionAt(log, uid string) (at, woken time.Time, kind string, ok bool) {
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if strings.Contains(line, "msg=woken") {
			woken, kind = logTime(fields), logField(fields, "kind")
			continue
		}
		if strings.Contains(line, "msg=decision") && strings.Contains(line, uid) {
			if at = logTime(fields); !at.IsZero() {
				return at, woken, kind, true
			}
		}
	}
	return time.Time{}, time.Time{}, "", false
}

// logField is the value of key=value among a text log line's fields.
func logField(fields []string, key string) string {
	for _, f := range fields {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

// logTime is a text log line's time.
func logTime(fields []string) time.Time {
	at, _ := time.Parse(time.RFC3339Nano, logField(fields, "time"))
	return at
}

package host

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/testing/testagent"
)

// TestAgentNotifiesSystemd runs the agent with NOTIFY_SOCKET pointing at a
// socket the test listens on, and sees READY=1, watchdog pings and, on
// SIGTERM, STOPPING=1 and a clean exit.
func TestAgentNotifiesSystemd(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatalf("listen on %s: %v", sock, err)
	}
	defer conn.Close()

	addr := testagent.FreeAddr(t)
	cmd, _ := testagent.Start(t, []string{"NOTIFY_SOCKET=" + sock, "WATCHDOG_USEC=400000"},
		"--metrics-bind-address", addr, "--root-dir", t.TempDir(), "--housekeeping-interval", "1s")

	got := map[string]int{}
	buf := make([]byte, 4096)
	deadline := time.Now().Add(20 * time.Second)
	for got["READY=1"] == 0 || got["WATCHDOG=1"] < 2 {
		_ = conn.SetReadDeadline(deadline)
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("waiting for READY=1 and two watchdog pings, got %v: %v", got, err)
		}
		for _, line := range strings.Split(string(buf[:n]), "\n") {
			if line != "" {
				got[line]++
			}
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for got["STOPPING=1"] == 0 {
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no STOPPING=1 after SIGTERM (got %v): %v", got, err)
		}
		got[strings.TrimSpace(string(buf[:n]))]++
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("agent exit after SIGTERM: %v, want status 0", err)
	}
}

// TestAgentWaitsForItsPort starts the agent while another listener holds
// its metrics port: it passes and feeds the watchdog meanwhile, warns once,
// and serves /healthz once the port is free.
func TestAgentWaitsForItsPort(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatalf("listen on %s: %v", sock, err)
	}
	defer conn.Close()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()

	cmd, logs := testagent.Start(t, []string{"NOTIFY_SOCKET=" + sock, "WATCHDOG_USEC=400000"},
		"--metrics-bind-address", addr, "--root-dir", t.TempDir(), "--housekeeping-interval", "1s")
	got := map[string]int{}
	buf := make([]byte, 4096)
	deadline := time.Now().Add(20 * time.Second)
	for got["READY=1"] == 0 || got["WATCHDOG=1"] < 3 {
		_ = conn.SetReadDeadline(deadline)
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("port taken: waiting for READY=1 and three watchdog pings, got %v: %v", got, err)
		}
		for _, line := range strings.Split(string(buf[:n]), "\n") {
			if line != "" {
				got[line]++
			}
		}
	}

	taken.Close()
	testagent.WaitHTTP(t, "http://"+addr+"/healthz")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("agent exit after SIGTERM: %v, want status 0", err)
	}
	out := logs.String()
	if n := strings.Count(out, "serving nothing until the port is free; evicting as usual"); n != 1 {
		t.Errorf("got %d warnings about the taken port, want 1:\n%s", n, out)
	}
	if n := strings.Count(out, "serving /metrics"); n != 1 {
		t.Errorf("got %d lines on serving, want 1:\n%s", n, out)
	}
}

// TestAgentReportsThisHost checks that standalone evictd exports this
// machine's real memory, filesystem, inode and PID figures, compared with
// what the test reads itself from /proc, the memory cgroup and statfs.
func TestAgentReportsThisHost(t *testing.T) {
	if _, err := os.Stat("/sys/fs/cgroup/memory/memory.usage_in_bytes"); err != nil {
		t.Skip("needs the cgroup v1 memory controller at /sys/fs/cgroup/memory")
	}
	rootDir := t.TempDir()
	addr := testagent.FreeAddr(t)
	testagent.Start(t, nil, "--metrics-bind-address", addr, "--root-dir", rootDir)
	testagent.WaitHTTP(t, "http://"+addr+"/readyz")
	metrics := testagent.ParseMetrics(t, testagent.WaitHTTP(t, "http://"+addr+"/metrics"))

	// Memory: capacity is MemTotal exactly; available is MemTotal minus the
	// root cgroup's working set, which moves a little between reads.
	memTotal := 1024 * procField(t, "/proc/meminfo", "MemTotal:")
	usage := testagent.ReadInt(t, "/sys/fs/cgroup/memory/memory.usage_in_bytes")
	inactive := procField(t, "/sys/fs/cgroup/memory/memory.stat", "total_inactive_file")
	wantAvail := memTotal - (usage - inactive)
	expect(t, metrics, `evictd_signal_capacity{signal="memory.available"}`, float64(memTotal), 0)
	expect(t, metrics, `evictd_signal_available{signal="memory.available"}`, float64(wantAvail), 0.03)

	var st syscall.Statfs_t
	if err := syscall.Statfs(rootDir, &st); err != nil {
		t.Fatal(err)
	}
	expect(t, metrics, `evictd_signal_capacity{signal="nodefs.available"}`, float64(st.Blocks)*float64(st.Bsize), 0.001)
	expect(t, metrics, `evictd_signal_available{signal="nodefs.available"}`, float64(st.Bavail)*float64(st.Bsize), 0.03)
	if st.Files > 0 {
		expect(t, metrics, `evictd_signal_capacity{signal="nodefs.inodesFree"}`, float64(st.Files), 0.001)
		expect(t, metrics, `evictd_signal_available{signal="nodefs.inodesFree"}`, float64(st.Ffree), 0.03)
	}

	pidCap := min(testagent.ReadInt(t, "/proc/sys/kernel/pid_max"), testagent.ReadInt(t, "/proc/sys/kernel/threads-max"))
	loadavg, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := strconv.ParseInt(strings.SplitN(strings.Fields(string(loadavg))[3], "/", 2)[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, metrics, `evictd_signal_capacity{signal="pid.available"}`, float64(pidCap), 0)
	expect(t, metrics, `evictd_signal_available{signal="pid.available"}`, float64(pidCap-tasks), 0.03)
}

func expect(t *testing.T, metrics map[string]float64, series string, want, tolerance float64) {
	t.Helper()
	got, ok := metrics[series]
	if !ok {
		t.Errorf("%s: not exported", series)
		return
	}
	if diff := got - want; diff > tolerance*want || -diff > tolerance*want {
		t.Errorf("%s: got %.0f, want %.0f within %.1f%%", series, got, want, 100*tolerance)
	}
}

// procField reads "key value" or "key: value kB" style files.
func procField(t *testing.T, path, key string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == key {
			v, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatalf("%s %s: %v", path, key, err)
			}
			return v
		}
	}
	t.Fatalf("%s has no %s", path, key)
	return 0
}

// TestAgentMetricsDocumented scrapes a real agent and holds what it serves
// to docs/METRICS.md's table, both ways: every evictd_ family served has a
// row, every label its row, every label value is named in its row (a
// signal, in the table); and every family of the table is served, or
// explained below as one this run cannot serve. The agent runs
// standalone with thresholds of every unit, one it sets aside, and a
// kubelet configuration that races it.
func TestAgentMetricsDocumented(t *testing.T) {
	doc, err := testagent.LoadMetricsDoc(filepath.Join("..", "..", "docs", "METRICS.md"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubelet := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(kubelet, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+
		"evictionHard:\n  memory.available: 100Mi\nnoSuchField: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := testagent.FreeAddr(t)
	testagent.Start(t, nil, "--metrics-bind-address", addr, "--root-dir", dir, "--kubelet-config", kubelet,
		// nodefs.available<1Ei cannot hold: it is set aside.
		"--eviction-hard=memory.available<100Mi,nodefs.available<1Ei,nodefs.inodesFree<1%,pid.available<1%,memory.pressure.some.avg10>99%",
		// Serves the release estimate and the predicted evictions' series.
		"--eviction-time-to-exhaustion")
	testagent.WaitHTTP(t, "http://"+addr+"/readyz")
	series, err := testagent.ParseExposition(testagent.WaitHTTP(t, "http://"+addr+"/metrics"))
	if err != nil {
		t.Fatal(err)
	}

	explained := map[string]string{
		"evictd_credential_expiry_timestamp_seconds": "needs a kubeconfig; the agent runs standalone",
		"evictd_informer_last_heard_seconds":         "needs the API server's pod informer",
		"evictd_informer_relists_total":              "needs the API server's pod informer",
		"evictd_scrape_review_duration_seconds":      "needs --metrics-delegated-auth and a scrape reviewed by the API server",
		"evictd_stats_age_seconds":                   "observed at an eviction decision; no pod here to evict",
		"evictd_detection_latency_seconds":           "observed at an eviction decision; no pod here to evict",
		"evictd_eviction_issue_latency_seconds":      "observed when an eviction is issued; standalone evictd issues none",
		"evictd_eviction_signal_latency_seconds":     "observed at a hard eviction's first signal; standalone evictd issues none",
		"evictd_eviction_release_seconds":            "observed when an evicted pod's memory is released; standalone evictd evicts none",
		"evictd_pressure_relief_seconds":             "observed when a met threshold stops being met; none is met here",
		// Counters appear with their first event, unless an alert needs
		// them from the start (docs/METRICS.md).
		"evictd_api_errors_total":           "counted at a failed API request; the agent runs standalone",
		"evictd_api_requests_refused_total": "counted at a refused API request; the agent runs standalone",
		"evictd_token_renewals_total":       "counted at a token renewal; the agent runs standalone",
		"evictd_scrape_reviews_total":       "counted at a review of a scraper under --metrics-delegated-auth",
		"evictd_evictions_total":            "counts evictions issued; standalone without --standalone-stop issues none (its dry runs are in evictd_evictions_not_issued_total)",
		"evictd_flight_records_total":       "counted when a decision to evict is recorded; none here",
		"evictd_pod_disk_walks_cut_total":   "counted when a pod's disk walk is cut; no pod here",
		"evictd_reclaim_total":              "counted at a node-level reclaim; no disk pressure and no runtime here",
		"evictd_reclaimed_bytes_total":      "counted at a node-level reclaim; no disk pressure and no runtime here",
		"evictd_runtime_errors_total":       "counted at a failed runtime call; with the runtime not reachable none is made",
	}
	// A wake-up comes of the host's own memory pressure (PSI, the fast
	// poll), which this test does not drive.
	if !slices.ContainsFunc(series, func(s testagent.Series) bool { return s.Family == "evictd_wakeups_total" }) {
		explained["evictd_wakeups_total"] = "counted at a wake-up; the host's memory pressure woke the loop in none of this run"
	}
	if _, err := os.Stat("/proc/pressure/memory"); err != nil {
		for _, f := range []string{"evictd_memory_pressure_stall_ratio", "evictd_memory_pressure_stall_local"} {
			explained[f] = "no PSI on this kernel"
		}
	}
	for _, s := range doc.Undocumented(series) {
		t.Error(s)
	}
	for _, s := range doc.Unserved(series, explained) {
		t.Error(s)
	}
	families := map[string]bool{}
	for _, s := range series {
		if strings.HasPrefix(s.Family, "evictd_") {
			families[s.Family] = true
		}
	}
	t.Logf("%d evictd_ families served; %d documented, %d of them explained as not served here", len(families), len(doc.Families()), len(explained))
}

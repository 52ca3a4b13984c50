package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/internal/manager"
	"github.com/evictd/evictd/internal/testing/hosttree"
	"github.com/evictd/evictd/signals"
)

// configFor parses args as the agent's flags.
func configFor(t *testing.T, args ...string) *config.Config {
	t.Helper()
	fs, opts := config.NewFlagSet("evictd")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	cfg, err := opts.Complete(fs)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestAgentInProcess builds a standalone agent on this host in the test's
// own process, with no container runtime at its endpoint, runs it until
// its first pass has observed the node's memory and served /status, and
// stops it by cancelling the context: Run returns nil and every part has
// ended. Its endpoints are served on a listener passed to it, as systemd
// passes one; its probes' own (--healthz-bind-address) it binds itself.
func TestAgentInProcess(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	cfg := configFor(t,
		"--root-dir", t.TempDir(),
		"--metrics-bind-address", addr,
		"--healthz-bind-address", "127.0.0.1:0",
		"--container-runtime-endpoint", "unix://"+filepath.Join(t.TempDir(), "none.sock"),
		"--housekeeping-interval", "200ms",
	)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := New(t.Context(), cfg, Options{Version: "test", Commit: "none", Log: log, Listener: ln})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer a.Close()
	if !a.redialed {
		t.Errorf("a runtime endpoint with nothing behind it was dialed; want a retry in the background")
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	var st manager.Status
	deadline := time.Now().Add(20 * time.Second)
	for {
		body, err := get("http://" + addr + "/status")
		if err == nil && json.Unmarshal([]byte(body), &st) == nil && !st.Time.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pass reported on /status in time (last: %v, %.200s)", err, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !hasObservation(st, signals.MemoryAvailable) {
		t.Errorf("the first pass observed no %s: %+v", signals.MemoryAvailable, st.Observations)
	}
	// After a pass, ready on the probes' address, which serves nothing
	// else.
	for strings.HasSuffix(a.probes.Addr(), ":0") {
		if time.Now().After(deadline) {
			t.Fatal("the probes' address not bound in time")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ok\n", "/status": "404 page not found\n"} {
		if body, err := get("http://" + a.probes.Addr() + path); err != nil || body != want {
			t.Errorf("GET %s on the probes' address: got %q, %v, want %q", path, body, err, want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after cancel: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10 s of its context's end")
	}
}

// TestAgentNewRefuses checks that New names what it cannot set up and
// starts nothing: a configuration none of whose thresholds can hold on
// this node, memory.available beyond its memory.
func TestAgentNewRefuses(t *testing.T) {
	cfg := configFor(t,
		"--root-dir", t.TempDir(),
		"--metrics-bind-address", "127.0.0.1:0",
		"--container-runtime-endpoint", "unix://"+filepath.Join(t.TempDir(), "none.sock"),
		"--eviction-hard", "memory.available<100Ti", "--enforce-node-allocatable=none",
	)
	a, err := New(t.Context(), cfg, Options{Log: slog.New(slog.DiscardHandler)})
	if err == nil {
		a.Close()
		t.Fatal("New with memory.available<100Ti alone succeeded; want a refusal")
	}
	for _, want := range []string{"no threshold can hold on this node; refusing to start", "--eviction-hard: threshold memory.available<100Ti is 100Ti, at or above the capacity of memory.available on this node"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v; want it to contain %q", err, want)
		}
	}
}

// TestAgentSetsAsideThresholdBeyondCapacity builds a standalone agent on a
// fixture node of 8 GiB, kubepods limited to 6 GiB, with
// memory.available<10Gi (and the allocatableMemory.available<10Gi derived
// from it), which can never hold there, and nodefs.available<1%, which
// can: New sets the first two aside with an error in the log and
// evictd_thresholds_set_aside, and the agent runs with the third (and the
// containerfs.available<1% the decision derives from it).
func TestAgentSetsAsideThresholdBeyondCapacity(t *testing.T) {
	const gi = int64(1) << 30
	dir := t.TempDir()
	tree, err := hosttree.Write(filepath.Join(dir, "host"), hosttree.Node{
		MemTotal: 8 * gi, Root: hosttree.Memory{Usage: 3 * gi, InactiveFile: gi},
		KubepodsLimit: 6 * gi, Kubepods: hosttree.Memory{Usage: gi},
		NoPSI: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := configFor(t, "--root-dir", dir, "--hostname-override", "n1", "--metrics-bind-address", "127.0.0.1:0",
		"--container-runtime-endpoint", "unix://"+filepath.Join(dir, "none.sock"),
		"--proc-root", tree.Proc, "--cgroup-mount", tree.Cgroup, "--kernel-memcg-notification=false", "--fast-poll-interval=0",
		"--housekeeping-interval", "200ms",
		"--eviction-hard", "memory.available<10Gi,nodefs.available<1%")
	logged := &lockedWriter{w: &bytes.Buffer{}}
	log := slog.New(slog.NewTextHandler(logged, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(t.Context(), cfg, Options{Log: log, Listener: ln})
	if err != nil {
		t.Fatalf("New: %v; want memory.available<10Gi set aside and a start", err)
	}
	defer a.Close()
	var kept []string
	for _, th := range a.loop.Thresholds() {
		kept = append(kept, th.String())
	}
	if want := []string{"nodefs.available<1%", "containerfs.available<1%"}; !slices.Equal(kept, want) {
		t.Errorf("the loop's thresholds: got %q, want %q", kept, want)
	}
	if len(cfg.Thresholds) != 3 {
		t.Errorf("New changed the caller's configuration: %d thresholds, want 3", len(cfg.Thresholds))
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	addr := ln.Addr().String()
	waitForPass(t, addr)
	body, err := get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`evictd_thresholds_set_aside{kind="hard",signal="memory.available"} 1`,
		`evictd_thresholds_set_aside{kind="hard",signal="allocatableMemory.available"} 1`,
		"evictd_standalone 1",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, `evictd_thresholds_set_aside{kind="hard",signal="nodefs.available"}`) {
		t.Errorf("/metrics has nodefs.available set aside")
	}
	out := logged.String()
	for _, want := range []string{
		`level=ERROR msg="threshold set aside: it cannot hold on this node; the other thresholds protect it" threshold=memory.available<10Gi kind=hard err="--eviction-hard: threshold memory.available<10Gi is 10Gi, at or above the capacity of memory.available on this node (8Gi)`,
		`threshold=allocatableMemory.available<10Gi`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

// TestAgentAwaitsOptionalKubeconfig: with --kubeconfig-optional and no
// file at --kubeconfig, New builds a standalone agent instead of refusing,
// says so at Warn and in evictd_standalone, and Run serves /status; without
// --kubeconfig-optional the same missing file is refused.
func TestAgentAwaitsOptionalKubeconfig(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "kubeconfig")
	args := []string{"--root-dir", t.TempDir(), "--hostname-override", "n1", "--metrics-bind-address", "127.0.0.1:0",
		"--container-runtime-endpoint", "unix://" + filepath.Join(t.TempDir(), "none.sock"),
		"--housekeeping-interval", "200ms", "--kubeconfig", missing}

	_, err := New(t.Context(), configFor(t, args...), Options{Log: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "--kubeconfig "+missing) {
		t.Fatalf("New with a missing --kubeconfig: got %v, want a refusal naming it", err)
	}

	logged := &lockedWriter{w: &bytes.Buffer{}}
	log := slog.New(slog.NewTextHandler(logged, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := configFor(t, append(args, "--kubeconfig-optional")...)
	a, err := New(t.Context(), cfg, Options{Log: log, Listener: ln})
	if err != nil {
		t.Fatalf("New with --kubeconfig-optional: %v, want a standalone start", err)
	}
	defer a.Close()
	if a.kube != nil || a.awaited != missing || cfg.Kubeconfig != missing {
		t.Errorf("got kube %v, awaited %q, the caller's kubeconfig %q; want standalone awaiting %s, the caller's configuration unchanged", a.kube, a.awaited, cfg.Kubeconfig, missing)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	addr := ln.Addr().String()
	waitForPass(t, addr)
	body, err := get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, "evictd_standalone 1") {
		t.Errorf("/metrics lacks evictd_standalone 1")
	}
	want := `level=WARN msg="the kubeconfig does not exist yet and --kubeconfig-optional is set: running standalone, with no API server; evictd observes, decides and exports metrics, evicting nothing, until the kubeconfig is written and evictd restarted" kubeconfig=` + missing
	if out := logged.String(); !strings.Contains(out, want) {
		t.Errorf("log lacks %q:\n%s", want, out)
	}
}

// TestRemindStandalone: every interval the agent says again that it runs
// standalone, and once the kubeconfig is there, that a restart would use
// it; it stops with its context.
func TestRemindStandalone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	clk := clocktesting.NewFakeClock(time.Now())
	logged := &lockedWriter{w: &bytes.Buffer{}}
	log := slog.New(slog.NewTextHandler(logged, nil))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- remindStandalone(ctx, clk, time.Minute, path, "evicting nothing", log) }()

	tick := func(want string) {
		t.Helper()
		before := strings.Count(logged.String(), "\n")
		for !clk.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
		clk.Step(time.Minute)
		deadline := time.Now().Add(10 * time.Second)
		for strings.Count(logged.String(), "\n") == before {
			if time.Now().After(deadline) {
				t.Fatalf("no reminder after a minute; log:\n%s", logged.String())
			}
			time.Sleep(time.Millisecond)
		}
		lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
		if last := lines[len(lines)-1]; !strings.Contains(last, want) || !strings.Contains(last, "kubeconfig="+path) {
			t.Errorf("reminder %q, want %q and the path", last, want)
		}
	}
	tick(`level=WARN msg="still no kubeconfig: running standalone, evicting nothing`)
	if err := os.WriteFile(path, []byte("apiVersion: v1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tick(`level=WARN msg="the kubeconfig is there now, but evictd reads it only at start: restart evictd`)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("got %v, want nil", err)
	}
}

// waitForPass waits until the agent at addr reports a pass on /status.
func waitForPass(t *testing.T, addr string) manager.Status {
	t.Helper()
	var st manager.Status
	deadline := time.Now().Add(20 * time.Second)
	for {
		body, err := get("http://" + addr + "/status")
		if err == nil && json.Unmarshal([]byte(body), &st) == nil && !st.Time.IsZero() {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pass reported on /status in time (last: %v, %.200s)", err, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lockedWriter lets the agent's goroutines log into one buffer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// String is what was written, read under the lock.
func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprint(l.w)
}

func hasObservation(st manager.Status, sig signals.Signal) bool {
	for _, o := range st.Observations {
		if o.Signal == sig {
			return true
		}
	}
	return false
}

func get(url string) (string, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestHostConfigFollowsTheGate: the agent reads memory.available as
// kubelet 1.37 does unless --feature-gates=HugepageAwareEviction=false.
func TestHostConfigFollowsTheGate(t *testing.T) {
	for _, tc := range []struct {
		args        []string
		wantDisable bool
	}{
		{nil, false},
		{[]string{"--feature-gates=HugepageAwareEviction=true"}, false},
		{[]string{"--feature-gates=HugepageAwareEviction=false"}, true},
	} {
		cfg := configFor(t, append([]string{"--root-dir", t.TempDir()}, tc.args...)...)
		if got := HostConfig(cfg).DisableHugepageAwareEviction; got != tc.wantDisable {
			t.Errorf("%q: DisableHugepageAwareEviction %v, want %v", tc.args, got, tc.wantDisable)
		}
	}
}

// TestAgentHugePages builds a standalone agent in-process on a fixture
// node of 16 GiB with 4 GiB of hugepages and a 5 GiB root working set:
// its memory.available is kubelet 1.37's by default, 16 − 5 − 4 = 7 GiB
// of 16 − 4 = 12 GiB, and 1.36's with the gate off; allocatableMemory is
// the kubelet's in both (no hugepages come off kubepods' limit).
func TestAgentHugePages(t *testing.T) {
	const gi = int64(1) << 30
	for _, tc := range []struct {
		gate               bool
		wantAvail, wantCap int64
	}{
		{true, 7 * gi, 12 * gi},
		{false, 11 * gi, 16 * gi},
	} {
		t.Run(fmt.Sprintf("HugepageAwareEviction=%v", tc.gate), func(t *testing.T) {
			dir := t.TempDir()
			tree, err := hosttree.Write(filepath.Join(dir, "host"), hosttree.Node{
				MemTotal: 16 * gi, HugePages: 4 * gi,
				Root:          hosttree.Memory{Usage: 6 * gi, InactiveFile: gi},
				KubepodsLimit: 12 * gi, Kubepods: hosttree.Memory{Usage: 2 * gi},
				NoPSI: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			cfg := configFor(t, "--root-dir", dir, "--hostname-override", "n1", "--metrics-bind-address", "127.0.0.1:0",
				"--container-runtime-endpoint", "unix://"+filepath.Join(dir, "none.sock"),
				"--proc-root", tree.Proc, "--cgroup-mount", tree.Cgroup, "--kernel-memcg-notification=false", "--fast-poll-interval=0",
				fmt.Sprintf("--feature-gates=HugepageAwareEviction=%v", tc.gate))
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			a, err := New(t.Context(), cfg, Options{Log: slog.New(slog.DiscardHandler), Listener: ln})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer a.Close()
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx) }()
			defer func() { cancel(); <-done }()
			var st manager.Status
			deadline := time.Now().Add(20 * time.Second)
			for {
				body, err := get("http://" + ln.Addr().String() + "/status")
				if err == nil && json.Unmarshal([]byte(body), &st) == nil && !st.Time.IsZero() {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no pass reported in time (last: %v)", err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			want := map[signals.Signal][2]int64{
				signals.MemoryAvailable:            {tc.wantAvail, tc.wantCap},
				signals.AllocatableMemoryAvailable: {10 * gi, 12 * gi},
			}
			for _, o := range st.Observations {
				if w, ok := want[o.Signal]; ok {
					if o.Available != w[0] || o.Capacity != w[1] {
						t.Errorf("%s: available %d of %d, want %d of %d", o.Signal, o.Available, o.Capacity, w[0], w[1])
					}
					delete(want, o.Signal)
				}
			}
			if len(want) > 0 {
				t.Errorf("no observation of %v in %+v", want, st.Observations)
			}
			// The memory source's shadows reach the loop: memory.available
			// by every formula (no swap-aware: the tree has no swap).
			body, err := get("http://" + ln.Addr().String() + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			for series, want := range map[string]int64{
				`evictd_memory_shadow_available_bytes{formula="working-set-1.36"}`: 11 * gi,
				`evictd_memory_shadow_capacity_bytes{formula="working-set-1.36"}`:  16 * gi,
				`evictd_memory_shadow_available_bytes{formula="working-set-1.37"}`: 7 * gi,
				`evictd_memory_shadow_capacity_bytes{formula="working-set-1.37"}`:  12 * gi,
				`evictd_memory_shadow_available_bytes{formula="memavailable"}`:     7 * gi,
				`evictd_memory_shadow_capacity_bytes{formula="memavailable"}`:      16 * gi,
			} {
				if got, ok := scraped(body, series); !ok || got != float64(want) {
					t.Errorf("%s: got %v (served %v), want %d", series, got, ok, want)
				}
			}
			if _, ok := scraped(body, `evictd_memory_shadow_available_bytes{formula="swap-aware"}`); ok {
				t.Error("a swap-aware shadow served on a node without swap")
			}
		})
	}
}

// scraped is the value of one series in a /metrics body.
func scraped(body, series string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

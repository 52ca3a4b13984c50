package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
// ended.
func TestAgentInProcess(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	cfg := configFor(t,
		"--root-dir", t.TempDir(),
		"--metrics-bind-address", addr,
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
// starts nothing: a threshold at or beyond this node's memory.
func TestAgentNewRefuses(t *testing.T) {
	cfg := configFor(t,
		"--root-dir", t.TempDir(),
		"--metrics-bind-address", "127.0.0.1:0",
		"--container-runtime-endpoint", "unix://"+filepath.Join(t.TempDir(), "none.sock"),
		"--eviction-hard", "memory.available<100Ti",
	)
	a, err := New(t.Context(), cfg, Options{Log: slog.New(slog.DiscardHandler)})
	if err == nil {
		a.Close()
		t.Fatal("New with memory.available<100Ti succeeded; want a refusal")
	}
	if !strings.Contains(err.Error(), "refusing to start") || !strings.Contains(err.Error(), "memory.available") {
		t.Errorf("New: %v; want the capacity refusal naming memory.available", err)
	}
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
		})
	}
}

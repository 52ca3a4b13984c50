package agent

import (
	"context"
	"encoding/json"
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

package agent

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/evictd/evictd/internal/cri"
	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/signals"
)

func TestStandaloneSpare(t *testing.T) {
	api := func(ns string) *cri.Sandbox {
		return &cri.Sandbox{Namespace: ns, Name: "p", UID: "u", Source: cri.ConfigSourceAPI}
	}
	for _, tc := range []struct {
		name string
		qos  signals.QOSClass
		sb   *cri.Sandbox
		want string
	}{
		{"BestEffort of the API server", signals.BestEffort, api("default"), ""},
		{"Burstable of the API server", signals.Burstable, api("team-a"), ""},
		{"Guaranteed", signals.Guaranteed, api("default"), "standalone: Guaranteed, requests unknown"},
		{"kube-system", signals.BestEffort, api("kube-system"), "standalone: kube-system, priority unknown"},
		{"no sandbox", signals.BestEffort, nil, "standalone: no ready sandbox in the container runtime"},
		{"no config source", signals.BestEffort, &cri.Sandbox{Namespace: "default", Source: ""}, "standalone: the kubelet recorded no config source"},
		// A static pod is critical through Static, whatever its QoS.
		{"static", signals.BestEffort, &cri.Sandbox{Namespace: "default", Source: "file"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &signals.Pod{UID: "u", QOS: tc.qos}
			if got := standaloneSpare(p, tc.sb); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNameAndSpare(t *testing.T) {
	sbs := map[string]cri.Sandbox{
		"u-api":    {Namespace: "default", Name: "web", UID: "u-api", Source: cri.ConfigSourceAPI},
		"u-static": {Namespace: "kube-system", Name: "etcd-node", UID: "u-static", Source: "file"},
	}
	pods := []signals.Pod{{UID: "u-api", QOS: signals.Burstable}, {UID: "u-static", QOS: signals.BestEffort}, {UID: "u-gone", QOS: signals.BestEffort}}
	// Observing only: named, static marked, nothing spared.
	observed := slices.Clone(pods)
	nameAndSpare(observed, sbs, nil, false)
	if observed[0].Name != "web" || !observed[1].Static || observed[2].Critical() {
		t.Errorf("observing only: got %+v", observed)
	}
	nameAndSpare(observed, nil, errors.New("runtime down"), false)
	if observed[2].Spared != "" {
		t.Errorf("observing only, the runtime down: %s spared", observed[2].UID)
	}

	nameAndSpare(pods, sbs, nil, true)
	want := []signals.Pod{
		{Namespace: "default", Name: "web", UID: "u-api", QOS: signals.Burstable},
		{Namespace: "kube-system", Name: "etcd-node", UID: "u-static", QOS: signals.BestEffort, Static: true},
		{UID: "u-gone", QOS: signals.BestEffort, Spared: "standalone: no ready sandbox in the container runtime"},
	}
	for i := range want {
		if got := pods[i]; got.Namespace != want[i].Namespace || got.Name != want[i].Name || got.Static != want[i].Static || got.Spared != want[i].Spared {
			t.Errorf("pod %s: got %+v, want %+v", want[i].UID, got, want[i])
		}
	}
	if pods[0].Critical() || !pods[1].Critical() || !pods[2].Critical() {
		t.Errorf("critical: got %v %v %v, want false true true", pods[0].Critical(), pods[1].Critical(), pods[2].Critical())
	}

	// The runtime down: every pod spared, none evictable.
	nameAndSpare(pods, nil, errors.New("runtime down"), true)
	for _, p := range pods {
		if !p.Critical() {
			t.Errorf("pod %s evictable with the runtime down: %+v", p.UID, p)
		}
	}
}

func TestStandaloneEvicter(t *testing.T) {
	pod := &signals.Pod{Namespace: "default", Name: "hog", UID: "u"}
	for _, tc := range []struct {
		name     string
		req      decide.Request
		stopErr  error
		wantErr  error
		wantStop bool
	}{
		{"hard memory", decide.Request{Signal: signals.MemoryAvailable, Hard: true}, nil, decide.ErrStoppedStandalone, true},
		{"hard allocatable", decide.Request{Signal: signals.AllocatableMemoryAvailable, Hard: true}, nil, decide.ErrStoppedStandalone, true},
		{"hard PIDs", decide.Request{Signal: signals.PIDAvailable, Hard: true}, nil, decide.ErrStoppedStandalone, true},
		{"soft memory", decide.Request{Signal: signals.MemoryAvailable}, nil, decide.ErrNotActed, false},
		{"hard disk", decide.Request{Signal: signals.NodeFsAvailable, Hard: true}, nil, decide.ErrNotActed, false},
		{"stop fails", decide.Request{Signal: signals.MemoryAvailable, Hard: true}, errors.New("runtime down"), nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stopped bool
			var grace int64 = -1
			e := standaloneEvicter{stop: func(_ context.Context, p *signals.Pod, g int64) error {
				stopped, grace = true, g
				return tc.stopErr
			}}
			tc.req.Pod = pod
			err := e.Evict(t.Context(), tc.req)
			switch {
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Errorf("got %v, want %v", err, tc.wantErr)
			case tc.wantErr == nil && (err == nil || errors.Is(err, decide.ErrStoppedStandalone)):
				t.Errorf("got %v, want the stop's error", err)
			}
			if stopped != tc.wantStop {
				t.Errorf("stopped %v, want %v", stopped, tc.wantStop)
			}
			if stopped && grace != 0 {
				t.Errorf("grace period %d, want 0 (SIGKILL: never a success)", grace)
			}
		})
	}
}

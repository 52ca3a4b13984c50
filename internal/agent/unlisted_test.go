package agent

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/internal/cri"
	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/signals"
)

// cacheOf is a pod cache holding pods (active) and known (every UID it
// holds, active or not).
type cacheOf struct {
	pods  []signals.Pod
	known map[string]bool
}

func (c cacheOf) Pods(context.Context) ([]signals.Pod, error) { return c.pods, nil }
func (c cacheOf) InFlight() []decide.InFlight                 { return nil }
func (c cacheOf) KnownUIDs() map[string]bool                  { return c.known }

// TestCachedPodsUnlisted: a pod cgroup the cache does not hold, with a
// ready sandbox, is ranked beside the cache's pods once it has been there
// unlistedAfter (a cache behind the API server), named after its sandbox
// and spared as standalone evictd spares; one the cache holds (active or
// terminating), one just made, and one without a ready sandbox are not
// added.
func TestCachedPodsUnlisted(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	cgroups := []signals.Pod{
		{UID: "u-known", QOS: signals.Burstable},
		{UID: "u-terminating", QOS: signals.BestEffort},
		{UID: "u-hog", QOS: signals.BestEffort},
		{UID: "u-guaranteed", QOS: signals.Guaranteed},
		{UID: "u-system", QOS: signals.BestEffort},
		{UID: "u-nosandbox", QOS: signals.BestEffort},
	}
	sbs := map[string]cri.Sandbox{
		"u-known":       {Namespace: "default", Name: "known", UID: "u-known", Source: cri.ConfigSourceAPI},
		"u-terminating": {Namespace: "default", Name: "terminating", UID: "u-terminating", Source: cri.ConfigSourceAPI},
		"u-hog":         {Namespace: "default", Name: "hog", UID: "u-hog", Source: cri.ConfigSourceAPI},
		"u-guaranteed":  {Namespace: "default", Name: "guaranteed", UID: "u-guaranteed", Source: cri.ConfigSourceAPI},
		"u-system":      {Namespace: "kube-system", Name: "system", UID: "u-system", Source: cri.ConfigSourceAPI},
	}
	found := func() ([]signals.Pod, error) { return slices.Clone(cgroups), nil }
	p := newCachedPods(
		cacheOf{
			pods:  []signals.Pod{{Namespace: "default", Name: "known", UID: "u-known"}},
			known: map[string]bool{"u-known": true, "u-terminating": true},
		},
		found,
		func(context.Context) (map[string]cri.Sandbox, error) { return sbs, nil },
		clk,
		slog.New(slog.NewTextHandler(t.Output(), nil)),
	)
	names := func() []string {
		t.Helper()
		pods, err := p.Pods(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, pod := range pods {
			out = append(out, fmt.Sprintf("%s %q", pod.Ref(), pod.Spared))
		}
		return out
	}
	want := []string{`default/known ""`}
	if got := names(); !slices.Equal(got, want) {
		t.Errorf("first sight: %q, want the cache's alone %q", got, want)
	}
	clk.Step(unlistedAfter - time.Second)
	if got := names(); !slices.Equal(got, want) {
		t.Errorf("%s unlisted: %q, want the cache's alone %q", unlistedAfter-time.Second, got, want)
	}
	clk.Step(time.Second)
	want = []string{`default/known ""`, `default/hog ""`,
		`default/guaranteed "standalone: Guaranteed, requests unknown"`,
		`kube-system/system "standalone: kube-system, priority unknown"`}
	if got := names(); !slices.Equal(got, want) {
		t.Errorf("%s unlisted: %q, want %q", unlistedAfter, got, want)
	}
	// The cache catches up with the hog: it is the cache's alone, and
	// forgotten, so a new cgroup of that UID waits again.
	p.cache = cacheOf{pods: []signals.Pod{{Namespace: "default", Name: "hog", UID: "u-hog"}}, known: map[string]bool{"u-hog": true, "u-known": true, "u-terminating": true, "u-guaranteed": true, "u-system": true}}
	if got, want := names(), []string{`default/hog ""`}; !slices.Equal(got, want) {
		t.Errorf("cache caught up: %q, want %q", got, want)
	}
	if _, ok := p.seen["u-hog"]; ok {
		t.Error("the hog is still remembered as unlisted once the cache holds it")
	}
	// A static pod: the cache holds its mirror pod, whose UID is not its
	// cgroup's. It is ranked as static, with no warning of a cache
	// behind; a tenant's pod whose sandbox says api is warned of.
	var logged bytes.Buffer
	p.log = slog.New(slog.NewTextHandler(&logged, nil))
	cgroups = append(cgroups, signals.Pod{UID: "u-static-hash", QOS: signals.Burstable}, signals.Pod{UID: "u-late", QOS: signals.BestEffort})
	sbs["u-static-hash"] = cri.Sandbox{Namespace: "kube-system", Name: "etcd-node", UID: "u-static-hash", Source: "file", Created: clk.Now().Add(-time.Hour)}
	sbs["u-late"] = cri.Sandbox{Namespace: "default", Name: "late", UID: "u-late", Source: cri.ConfigSourceAPI, Created: clk.Now().Add(-time.Hour)}
	pods, err := p.Pods(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var static *signals.Pod
	for i := range pods {
		if pods[i].UID == "u-static-hash" {
			static = &pods[i]
		}
	}
	if static == nil || !static.Static || !static.Critical() {
		t.Errorf("the static pod's cgroup ranked as %+v, want static and critical", static)
	}
	if out := logged.String(); strings.Contains(out, "etcd-node") || !strings.Contains(out, "default/late") {
		t.Errorf("want a warning for default/late alone, none for the static pod:\n%s", out)
	}
	// Cgroups that cannot be read: the cache's pods alone.
	p.discover = func() ([]signals.Pod, error) { return nil, fmt.Errorf("no kubepods") }
	if got, want := names(), []string{`default/hog ""`}; !slices.Equal(got, want) {
		t.Errorf("cgroups unreadable: %q, want %q", got, want)
	}
}

// TestCachedPodsUnlistedBySandboxAge: the wait for a pod the cache does
// not hold runs from its sandbox's creation when the cache never held it,
// so a hog the cache never saw, first seen at its crossing after running
// for many seconds, is ranked by that very pass; a pod the cache held and
// dropped (its cgroup still torn down), or whose sandbox the runtime did
// not date, waits unlistedAfter from its first sight.
func TestCachedPodsUnlistedBySandboxAge(t *testing.T) {
	start := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		// heldBefore: the cache held the pod at an earlier pass.
		heldBefore bool
		created    time.Time // the sandbox's, by the runtime
		// rankedAfter: the first step after first sight (0: at first
		// sight) from which the pod is ranked.
		rankedAfter time.Duration
	}{
		{name: "never held, sandbox 20 s old", created: start.Add(-20 * time.Second), rankedAfter: 0},
		{name: "never held, sandbox exactly unlistedAfter old", created: start.Add(-unlistedAfter), rankedAfter: 0},
		{name: "never held, sandbox 2 s old", created: start.Add(-2 * time.Second), rankedAfter: unlistedAfter - 2*time.Second},
		{name: "never held, sandbox not dated", rankedAfter: unlistedAfter},
		{name: "held and dropped, sandbox 20 s old", heldBefore: true, created: start.Add(-20 * time.Second), rankedAfter: unlistedAfter},
		{name: "sandbox dated in the future (clock skew)", created: start.Add(time.Hour), rankedAfter: unlistedAfter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(start)
			sbs := map[string]cri.Sandbox{
				"u-hog": {Namespace: "default", Name: "hog", UID: "u-hog", Source: cri.ConfigSourceAPI, Created: tt.created},
			}
			p := newCachedPods(cacheOf{known: map[string]bool{}},
				func() ([]signals.Pod, error) { return []signals.Pod{{UID: "u-hog", QOS: signals.BestEffort}}, nil },
				func(context.Context) (map[string]cri.Sandbox, error) { return sbs, nil },
				clk, slog.New(slog.NewTextHandler(t.Output(), nil)))
			ranked := func() bool {
				t.Helper()
				pods, err := p.Pods(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				return slices.ContainsFunc(pods, func(pod signals.Pod) bool { return pod.Ref() == "default/hog" })
			}
			if tt.heldBefore {
				p.cache = cacheOf{pods: []signals.Pod{{Namespace: "default", Name: "hog", UID: "u-hog"}}, known: map[string]bool{"u-hog": true}}
				ranked()
				p.cache = cacheOf{known: map[string]bool{}}
			}
			for step := time.Duration(0); step <= unlistedAfter; step += time.Second {
				clk.SetTime(start.Add(step))
				if got, want := ranked(), step >= tt.rankedAfter; got != want {
					t.Errorf("%s after first sight: ranked %v, want %v", step, got, want)
				}
			}
		})
	}
}

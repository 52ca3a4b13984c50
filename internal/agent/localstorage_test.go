package agent

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/internal/metrics"
)

func TestLocalStorageAgentFollowsTheNode(t *testing.T) {
	reg := prometheus.NewRegistry()
	gauge, err := metrics.RegisterLocalStorageAgent(reg)
	if err != nil {
		t.Fatal(err)
	}
	var node struct{ reported, known bool }
	var logs bytes.Buffer
	a := &localStorageAgent{
		node:  func() (bool, bool) { return node.reported, node.known },
		gauge: gauge,
		log:   slog.New(slog.NewTextHandler(&logs, nil)),
	}
	exported := func() string {
		var b strings.Builder
		for _, agent := range []string{"kubelet", "evictd"} {
			if agentValue(t, reg, agent) == 1 {
				b.WriteString(agent)
			}
		}
		return b.String()
	}
	for _, step := range []struct {
		name            string
		reported, known bool
		want            bool
		wantLog         string
	}{
		{"the node not listed yet: the kubelet's default", false, false, true, "the node is not known yet"},
		{"the same again: no new line", false, false, true, ""},
		{"the capacity reported", true, true, true, "localStorageCapacityIsolation is on"},
		{"the capacity gone", false, true, false, "evictd evicts the pods over their own local-storage limits"},
		{"back", true, true, true, "are left to the kubelet"},
	} {
		logs.Reset()
		node.reported, node.known = step.reported, step.known
		if got := a.ByKubelet(); got != step.want {
			t.Errorf("%s: by the kubelet %t, want %t", step.name, got, step.want)
		}
		want := "evictd"
		if step.want {
			want = "kubelet"
		}
		if got := exported(); got != want {
			t.Errorf("%s: evictd_local_storage_eviction_agent is 1 for %q, want %q", step.name, got, want)
		}
		if step.wantLog == "" && logs.Len() > 0 || !strings.Contains(logs.String(), step.wantLog) {
			t.Errorf("%s: logged %q, want a line with %q", step.name, logs.String(), step.wantLog)
		}
	}
}

func TestLocalStorageByKubeletFromTheConfiguration(t *testing.T) {
	on, off := true, false
	for _, tc := range []struct {
		mode    string
		kubelet *bool
		want    bool
	}{
		{config.LocalStorageKubelet, nil, false}, // decided from the node while running
		{config.LocalStorageKubelet, &on, true},
		{config.LocalStorageKubelet, &off, false}, // one agent always evicts them
		{config.LocalStorageEvictd, &on, false},
		{config.LocalStorageEvictd, nil, false},
	} {
		cfg := &config.Config{LocalStorageEviction: tc.mode, KubeletLocalStorage: tc.kubelet}
		if got := localStorageByKubelet(cfg); got != tc.want {
			t.Errorf("%s with the kubelet's %v: by the kubelet %t, want %t", tc.mode, tc.kubelet, got, tc.want)
		}
	}
}

// agentValue is evictd_local_storage_eviction_agent{agent} as gathered
// from reg.
func agentValue(t *testing.T, reg *prometheus.Registry, agent string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "evictd_local_storage_eviction_agent" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "agent" && l.GetValue() == agent {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no series evictd_local_storage_eviction_agent{agent=%q}", agent)
	return 0
}

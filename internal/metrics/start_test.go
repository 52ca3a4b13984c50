package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/evictd/evictd/signals"
)

func TestRegisterStart(t *testing.T) {
	for _, tc := range []struct {
		name       string
		setAside   []SetAside
		standalone bool
		want       string
	}{
		{"nothing set aside, with an API server", nil, false, `
# HELP evictd_standalone 1 when evictd runs without an API server (no --kubeconfig, or --kubeconfig-optional with the file not there at start): it observes and decides but evicts, taints and posts nothing; else 0.
# TYPE evictd_standalone gauge
evictd_standalone 0
`},
		{"two set aside, standalone", []SetAside{{signals.MemoryAvailable, KindHard}, {signals.AllocatableMemoryAvailable, KindHard}}, true, `
# HELP evictd_standalone 1 when evictd runs without an API server (no --kubeconfig, or --kubeconfig-optional with the file not there at start): it observes and decides but evicts, taints and posts nothing; else 0.
# TYPE evictd_standalone gauge
evictd_standalone 1
# HELP evictd_thresholds_set_aside 1 for each threshold evictd set aside at start because it cannot hold on this node (at or above its signal's capacity: it would always be met); the other thresholds protect the node. No series when none was. kind is hard or soft.
# TYPE evictd_thresholds_set_aside gauge
evictd_thresholds_set_aside{kind="hard",signal="allocatableMemory.available"} 1
evictd_thresholds_set_aside{kind="hard",signal="memory.available"} 1
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			if err := RegisterStart(reg, tc.setAside, tc.standalone); err != nil {
				t.Fatal(err)
			}
			if err := testutil.GatherAndCompare(reg, strings.NewReader(tc.want), "evictd_standalone", "evictd_thresholds_set_aside"); err != nil {
				t.Error(err)
			}
			lint(t, reg)
		})
	}
}

// lint runs reg's families through promtool's naming rules.
func lint(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

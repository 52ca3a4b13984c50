package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/evictd/evictd/signals"
)

func TestMemoryShadow(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.SetMemoryShadow(signals.FormulaWorkingSet137, 100, 1000)
	m.SetMemoryShadow(signals.FormulaMemAvailable, 50, 1200)
	m.CountMemoryShadowPass(signals.FormulaMemAvailable, false)
	m.CountMemoryShadowPass(signals.FormulaMemAvailable, true)
	m.CountMemoryShadowPass(signals.FormulaWorkingSet136, false)
	m.SetMemoryShadow(signals.FormulaSwapAware, 1, 2)
	m.ForgetMemoryShadow(signals.FormulaSwapAware)
	want := `
# HELP evictd_memory_shadow_available_bytes ` + helpOf(t, reg, "evictd_memory_shadow_available_bytes") + `
# TYPE evictd_memory_shadow_available_bytes gauge
evictd_memory_shadow_available_bytes{formula="memavailable"} 50
evictd_memory_shadow_available_bytes{formula="working-set-1.37"} 100
# HELP evictd_memory_shadow_capacity_bytes ` + helpOf(t, reg, "evictd_memory_shadow_capacity_bytes") + `
# TYPE evictd_memory_shadow_capacity_bytes gauge
evictd_memory_shadow_capacity_bytes{formula="memavailable"} 1200
evictd_memory_shadow_capacity_bytes{formula="working-set-1.37"} 1000
# HELP evictd_memory_shadow_threshold_met_passes_total ` + helpOf(t, reg, "evictd_memory_shadow_threshold_met_passes_total") + `
# TYPE evictd_memory_shadow_threshold_met_passes_total counter
evictd_memory_shadow_threshold_met_passes_total{formula="memavailable"} 1
evictd_memory_shadow_threshold_met_passes_total{formula="working-set-1.36"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"evictd_memory_shadow_available_bytes", "evictd_memory_shadow_capacity_bytes", "evictd_memory_shadow_threshold_met_passes_total"); err != nil {
		t.Error(err)
	}
	for _, name := range []string{"evictd_memory_shadow_available_bytes", "evictd_memory_shadow_capacity_bytes", "evictd_memory_shadow_threshold_met_passes_total"} {
		help := helpOf(t, reg, name)
		for _, f := range signals.MemoryFormulas() {
			if !mentions(help, string(f)) {
				t.Errorf("%s: HELP does not name %s: %q", name, f, help)
			}
		}
	}
}

// helpOf is the HELP text of a family on reg.
func helpOf(t *testing.T, reg *prometheus.Registry, name string) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetHelp()
		}
	}
	t.Fatalf("no family %s", name)
	return ""
}

package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/evictd/evictd/signals"
)

func TestOOMKills(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.AddOOMKills(signals.OOMScopeNode, 0) // the baseline read
	m.AddOOMKills(signals.OOMScopeNode, 3)
	m.AddOOMKills(signals.OOMScopeNode, -1) // never lowered
	want := `
# HELP evictd_oom_kills_total ` + helpOf(t, reg, "evictd_oom_kills_total") + `
# TYPE evictd_oom_kills_total counter
evictd_oom_kills_total{scope="node"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "evictd_oom_kills_total"); err != nil {
		t.Error(err)
	}
	help := helpOf(t, reg, "evictd_oom_kills_total")
	for _, s := range signals.OOMScopes() {
		if !mentions(help, string(s)) {
			t.Errorf("HELP does not name %s: %q", s, help)
		}
	}
}

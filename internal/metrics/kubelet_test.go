package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRegisterKubeletRaces(t *testing.T) {
	reg := prometheus.NewRegistry()
	kinds := []string{"threshold", "local-storage", "image-gc"}
	if err := RegisterKubeletRaces(reg, kinds, map[string]bool{"threshold": true, "image-gc": true}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP evictd_kubelet_eviction_races 1 when the kubelet's configuration (--kubelet-config, --kubelet-config-dir) still has settings of kind with which it acts on pressure too, racing evictd: threshold (evictionHard, evictionSoft), local-storage (localStorageCapacityIsolation), image-gc (imageGCHighThresholdPercent below 100, imageMaximumGCAge); else 0.
# TYPE evictd_kubelet_eviction_races gauge
evictd_kubelet_eviction_races{kind="image-gc"} 1
evictd_kubelet_eviction_races{kind="local-storage"} 0
evictd_kubelet_eviction_races{kind="threshold"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "evictd_kubelet_eviction_races"); err != nil {
		t.Error(err)
	}
	if err := RegisterKubeletRaces(reg, kinds, nil); err == nil {
		t.Error("second registration: got no error, want one")
	}
}

func TestRegisterConfigWarnings(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	if err := RegisterConfigWarnings(reg, []string{"unknown-field", "duplicate-field"}, map[string]int{"unknown-field": 2}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP evictd_config_warnings Fields of kind that made a configuration file (evictd's own --config and --config-dir drop-ins, or a KubeletConfiguration: --import-kubelet-config, --kubelet-config, --kubelet-config-dir) fail strict decoding, which evictd then decoded leniently as the kubelet does: unknown-field (ignored: from a newer kubelet, or misspelt), duplicate-field (the last one taken). The log at start and check-config name them.
# TYPE evictd_config_warnings gauge
evictd_config_warnings{kind="duplicate-field"} 0
evictd_config_warnings{kind="unknown-field"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "evictd_config_warnings"); err != nil {
		t.Error(err)
	}
	lint(t, reg)
}

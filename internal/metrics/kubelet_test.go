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

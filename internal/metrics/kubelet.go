package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// RegisterKubeletRaces registers evictd_kubelet_eviction_races, one series
// per kind in kinds: 1 when the kubelet's configuration has a setting of
// that kind racing evictd (present holds those kinds), else 0. The value
// is fixed at start: evictd reads the kubelet's configuration once.
func RegisterKubeletRaces(reg prometheus.Registerer, kinds []string, present map[string]bool) error {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "evictd_kubelet_eviction_races",
		Help: "1 when the kubelet's configuration (--kubelet-config, --kubelet-config-dir) still has settings of kind with which it acts on pressure too, racing evictd: " +
			"threshold (evictionHard, evictionSoft), local-storage (localStorageCapacityIsolation), image-gc (imageGCHighThresholdPercent below 100, imageMaximumGCAge); else 0.",
	}, []string{"kind"})
	for _, k := range kinds {
		v := 0.0
		if present[k] {
			v = 1
		}
		g.WithLabelValues(k).Set(v)
	}
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("register kubelet race metric: %w", err)
	}
	return nil
}

// RegisterConfigWarnings registers evictd_config_warnings, one series per
// kind in kinds: how many fields of that kind (counts) evictd let through
// when it decoded a KubeletConfiguration file leniently, as the kubelet
// does. The value is fixed at start: evictd reads its files once.
func RegisterConfigWarnings(reg prometheus.Registerer, kinds []string, counts map[string]int) error {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "evictd_config_warnings",
		Help: "Fields of kind that made a configuration file (evictd's own --config and --config-dir drop-ins, or a KubeletConfiguration: --import-kubelet-config, --kubelet-config, --kubelet-config-dir) fail strict decoding, which evictd then decoded leniently as the kubelet does: " +
			"unknown-field (ignored: from a newer kubelet, or misspelt), duplicate-field (the last one taken). The log at start and check-config name them.",
	}, []string{"kind"})
	for _, k := range kinds {
		g.WithLabelValues(k).Set(float64(counts[k]))
	}
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("register configuration warning metric: %w", err)
	}
	return nil
}

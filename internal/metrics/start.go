package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/evictd/evictd/signals"
)

// SetAside is a threshold the agent set aside at start, as the labels of
// evictd_thresholds_set_aside name it.
type SetAside struct {
	Signal signals.Signal
	Kind   ThresholdKind
}

// RegisterStart registers what the agent found at start and keeps for its
// lifetime: evictd_thresholds_set_aside, 1 for each threshold in setAside
// (none when it set none aside), and evictd_standalone, 1 when it runs
// without an API server.
func RegisterStart(reg prometheus.Registerer, setAside []SetAside, standalone bool) error {
	aside := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "evictd_thresholds_set_aside",
		Help: "1 for each threshold evictd set aside at start because it cannot hold on this node (at or above its signal's capacity: it would always be met); the other thresholds protect the node. " +
			"No series when none was. kind is hard or soft.",
	}, []string{"signal", "kind"})
	for _, s := range setAside {
		aside.WithLabelValues(string(s.Signal), string(s.Kind)).Set(1)
	}
	alone := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "evictd_standalone",
		Help: "1 when evictd runs without an API server (no --kubeconfig, or --kubeconfig-optional with the file not there at start): it observes and decides but evicts, taints and posts nothing; else 0.",
	})
	alone.Set(boolToFloat(standalone))
	for _, c := range []prometheus.Collector{aside, alone} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register start metrics: %w", err)
		}
	}
	return nil
}

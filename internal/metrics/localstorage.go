package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// LocalStorageAgent is evictd_local_storage_eviction_agent: which agent
// evicts the pods over their own local-storage limits.
type LocalStorageAgent struct {
	g *prometheus.GaugeVec
}

// RegisterLocalStorageAgent registers evictd_local_storage_eviction_agent,
// two series, agent="kubelet" and agent="evictd", 1 for the one that
// evicts the pods over their own local-storage limits and 0 for the
// other; evictd's at first, until Set.
func RegisterLocalStorageAgent(reg prometheus.Registerer) (*LocalStorageAgent, error) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "evictd_local_storage_eviction_agent",
		Help: "1 for the agent that evicts the pods over their own ephemeral-storage limits or emptyDir sizeLimit, 0 for the other: " +
			"kubelet (its localStorageCapacityIsolation on, evictd leaving them to it) or evictd (--local-storage-eviction).",
	}, []string{"agent"})
	if err := reg.Register(g); err != nil {
		return nil, fmt.Errorf("register local-storage agent metric: %w", err)
	}
	a := &LocalStorageAgent{g: g}
	a.Set(false)
	return a, nil
}

// Set says whether the kubelet (true) or evictd (false) evicts them.
func (a *LocalStorageAgent) Set(byKubelet bool) {
	k, e := 0.0, 1.0
	if byKubelet {
		k, e = 1, 0
	}
	a.g.WithLabelValues("kubelet").Set(k)
	a.g.WithLabelValues("evictd").Set(e)
}

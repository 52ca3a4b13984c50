package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/evictd/evictd/signals"
)

// oomScopes are the scope label's values (signals.OOMScope).
var oomScopes = []value[signals.OOMScope]{
	{v: signals.OOMScopeKubepods, means: "processes in the pods' cgroups, whichever limit was reached, the container's own included; cgroup v2 only"},
	{v: signals.OOMScopeNode, means: "every process on the node, /proc/vmstat oom_kill; the kubepods kills included"},
}

func newOOMKills() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "evictd_oom_kills_total",
		Help: "Processes the kernel's OOM killer killed while evictd ran, by scope: " + listed(oomScopes) + ". A series for each scope the node can count, from the first reading of its count (the baseline).",
	}, []string{"scope"})
}

// AddOOMKills counts n kills of scope s; n = 0 creates its series at 0,
// for a scope whose first count was read.
func (m *Metrics) AddOOMKills(s signals.OOMScope, n int64) {
	if m == nil || n < 0 {
		return
	}
	m.oomKills.WithLabelValues(string(s)).Add(float64(n))
}

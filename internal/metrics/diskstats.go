package metrics

import "github.com/prometheus/client_golang/prometheus"

// WalkCut is the reason label of evictd_pod_disk_walks_cut_total: why the
// walk of a pod's log and volume directories was cut.
type WalkCut string

// Reasons a pod's walk is cut.
const (
	WalkCutTime    WalkCut = "time"
	WalkCutEntries WalkCut = "entries"
)

var walkCuts = []value[WalkCut]{
	{v: WalkCutTime, means: "the walk ran past the pod's time budget: the pod keeps its previous disk stats, and is not walked again for --volume-stats-agg-period"},
	{v: WalkCutEntries, means: "the pod's directories hold more entries than its budget: those past it are not measured"},
}

// walkCutValues lists the values of evictd_pod_disk_walks_cut_total's
// reason label.
func walkCutValues() []WalkCut { return valuesOf(walkCuts) }

func newWalksCut() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "evictd_pod_disk_walks_cut_total",
		Help: "Pods whose log and volume directories were not measured whole when the pods' disk stats were gathered, counted once per pod each time, by reason: " + listed(walkCuts) + ". No pod label: the warning log names the pods.",
	}, []string{"reason"})
}

func newDiskStale() prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "evictd_pod_disk_stats_stale_pods",
		Help: "Pods listed at the last pass whose disk stats are older than two gathering intervals (the gathering's interval and deadline), or that have been listed that long without any: their walks did not finish, so they are ranked on older stats (or as pods without stats).",
	})
}

// IncDiskWalkCut counts a pod whose directories were not measured whole,
// for reason.
func (m *Metrics) IncDiskWalkCut(reason WalkCut) {
	if m == nil {
		return
	}
	m.walksCut.WithLabelValues(string(reason)).Inc()
}

// SetDiskStatsStale sets how many listed pods have disk stats too old (or
// none for too long).
func (m *Metrics) SetDiskStatsStale(n int) {
	if m == nil {
		return
	}
	m.diskStale.Set(float64(n))
}

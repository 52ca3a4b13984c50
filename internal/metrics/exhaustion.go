package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/evictd/evictd/signals"
)

// releaseBuckets are for the times from a decision to the victim's memory
// released and from a crossing to relief: a killed process's memory goes
// in milliseconds, a pod waits out its grace period and its cleanup
// (seconds), and pressure that no eviction relieves lasts a minute and
// more.
var releaseBuckets = []float64{
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60,
}

// exhaustion are the figures time to exhaustion acts on, and its
// decisions.
type exhaustion struct {
	release   *prometheus.HistogramVec
	relief    *prometheus.HistogramVec
	estimate  *prometheus.GaugeVec // no labels: served once set
	predicted *prometheus.CounterVec
}

func newExhaustion() exhaustion {
	return exhaustion{
		release: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "evictd_eviction_release_seconds",
			Help:    "Time from a decision to evict for a memory signal to the victim's memory released, as the passes see it: the pod's cgroup gone from the pods' stats, or its working set down to a quarter of what it was.",
			Buckets: releaseBuckets,
		}, []string{"signal"}),
		relief: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "evictd_pressure_relief_seconds",
			Help:    "Time from a threshold first observed met to the first pass that observes it no longer met (its minimum reclaim counted), whether or not an eviction came between.",
			Buckets: releaseBuckets,
		}, []string{"signal", "kind"}),
		estimate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "evictd_eviction_release_estimate_seconds",
			Help: "The release time --eviction-time-to-exhaustion acts with: the 90th percentile of the last 20 evictd_eviction_release_seconds, 1 before any. Exported while the flag is on.",
		}, nil),
		predicted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "evictd_predicted_evictions_total",
			Help: "Decisions to evict taken before their hard memory threshold was met, because the memory's growth said it runs out sooner than evictd's measured release time plus the margin (--eviction-time-to-exhaustion). Its series exist while the flag is on.",
		}, []string{"signal"}),
	}
}

func (m *Metrics) registerExhaustion(reg prometheus.Registerer, errs *[]error) {
	m.exhaustion.release = registerOrShare(reg, m.exhaustion.release, errs)
	m.exhaustion.relief = registerOrShare(reg, m.exhaustion.relief, errs)
	m.exhaustion.estimate = registerOrShare(reg, m.exhaustion.estimate, errs)
	m.exhaustion.predicted = registerOrShare(reg, m.exhaustion.predicted, errs)
}

// InitPredicted creates evictd_predicted_evictions_total's series of sig
// at 0, for a signal time to exhaustion may act on.
func (m *Metrics) InitPredicted(sig signals.Signal) {
	if m == nil {
		return
	}
	m.exhaustion.predicted.WithLabelValues(string(sig))
}

// IncPredicted counts a decision to evict for sig taken before its
// threshold was met.
func (m *Metrics) IncPredicted(sig signals.Signal) {
	if m == nil {
		return
	}
	m.exhaustion.predicted.WithLabelValues(string(sig)).Inc()
}

// ObserveRelease records the time from a decision to evict for sig to
// the victim's memory released.
func (m *Metrics) ObserveRelease(sig signals.Signal, d time.Duration) {
	if m == nil {
		return
	}
	m.exhaustion.release.WithLabelValues(string(sig)).Observe(seconds(d))
}

// ObserveRelief records the time from a threshold of sig first observed
// met to the pass that saw it no longer met.
func (m *Metrics) ObserveRelief(sig signals.Signal, kind ThresholdKind, d time.Duration) {
	if m == nil {
		return
	}
	m.exhaustion.relief.WithLabelValues(string(sig), string(kind)).Observe(seconds(d))
}

// SetReleaseEstimate exports the release time time to exhaustion acts
// with.
func (m *Metrics) SetReleaseEstimate(d time.Duration) {
	if m == nil {
		return
	}
	m.exhaustion.estimate.WithLabelValues().Set(seconds(d))
}

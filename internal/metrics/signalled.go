package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/evictd/evictd/signals"
)

// SignalPath is the path label of evictd_eviction_signal_latency_seconds:
// how an evicted pod's containers got their first stop signal.
type SignalPath string

// The ways the first stop signal goes.
const (
	SignalDirect  SignalPath = "direct"
	SignalRuntime SignalPath = "runtime"
)

var signalPaths = []value[SignalPath]{
	{v: SignalDirect, means: "each container's stop signal, as the runtime reports it (SIGTERM where it has not said), sent by evictd itself to the containers' main processes through pidfds, a hard eviction of a pod whose restartPolicy is Always"},
	{v: SignalRuntime, means: "the stop asked of the container runtime through the CRI; the runtime's own kill follows, about 25 ms later on containerd"},
}

// signalBuckets run from 100 µs (a pidfd signal) to 5 s (a runtime stop
// held back by --hard-eviction-stop-wait and a slow API server).
var signalBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

func newSignalLatency() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "evictd_eviction_signal_latency_seconds",
		Help:    "Time from a hard eviction's decision to the first stop signal of the pod's containers, by path: " + listed(signalPaths) + ".",
		Buckets: signalBuckets,
	}, []string{"signal", "path"})
}

// ObserveSignalLatency records the time from the decision to evict for sig
// to the first stop signal of the pod's containers, sent by path.
func (m *Metrics) ObserveSignalLatency(sig signals.Signal, path SignalPath, d time.Duration) {
	if m == nil {
		return
	}
	m.signalled.WithLabelValues(string(sig), string(path)).Observe(seconds(d))
}

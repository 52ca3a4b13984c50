package metrics

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/signals"
)

// TestMethods checks each method's effect against the exposition text it
// must produce. Counters are created at 0 for every signal, so for them the
// one series the method touched is collected, not the whole family.
func TestMethods(t *testing.T) {
	tests := []struct {
		name    string
		do      func(m *Metrics)
		collect func(m *Metrics) prometheus.Collector
		want    string
	}{
		{
			name: "SetObservation",
			do: func(m *Metrics) {
				m.SetObservation(signals.MemoryAvailable, 80<<20, 16<<30)
				m.SetObservation(signals.PIDAvailable, 4000, 4194304)
				// A later reading replaces the earlier one.
				m.SetObservation(signals.PIDAvailable, 3990, 4194304)
			},
			collect: func(m *Metrics) prometheus.Collector { return collectors(m.available, m.capacity) },
			want: `
# HELP evictd_signal_available Deprecated: use evictd_signal_available_bytes, _inodes and _pids. Amount of the signal's resource available at the last observation: bytes for memory and filesystem signals, a count for inodesFree and pid.available.
# TYPE evictd_signal_available gauge
evictd_signal_available{signal="memory.available"} 8.388608e+07
evictd_signal_available{signal="pid.available"} 3990
# HELP evictd_signal_capacity Deprecated: use evictd_signal_capacity_bytes, _inodes and _pids. Capacity of the signal's resource at the last observation: bytes for memory and filesystem signals, a count for inodesFree and pid.available.
# TYPE evictd_signal_capacity gauge
evictd_signal_capacity{signal="memory.available"} 1.7179869184e+10
evictd_signal_capacity{signal="pid.available"} 4.194304e+06
`,
		},
		{
			name: "SetObservation of the stall signals: a ratio by kind and window, not an amount available",
			do: func(m *Metrics) {
				m.SetObservation(signals.MemoryPressureFullAvg10, 3550, signals.StallScale)
				m.SetObservation(signals.MemoryPressureSomeAvg300, 1, signals.StallScale)
				m.SetObservation(signals.MemoryPressureSomeAvg60, 0, signals.StallScale)
				m.SetObservation(signals.MemoryAvailable, 80<<20, 16<<30)
				m.SetThreshold(signals.MemoryPressureFullAvg10, KindHard, 2000, true)
			},
			collect: func(m *Metrics) prometheus.Collector { return collectors(m.stall, m.available, m.threshold) },
			want: `
# HELP evictd_memory_pressure_stall_ratio Share of time, averaged over the window, in which some task (kind=some) or every non-idle task (kind=full) of the node was stalled waiting for memory (PSI, /proc/pressure/memory), at the last observation.
# TYPE evictd_memory_pressure_stall_ratio gauge
evictd_memory_pressure_stall_ratio{kind="full",window="10s"} 0.355
evictd_memory_pressure_stall_ratio{kind="some",window="300s"} 0.0001
evictd_memory_pressure_stall_ratio{kind="some",window="60s"} 0
# HELP evictd_signal_available Deprecated: use evictd_signal_available_bytes, _inodes and _pids. Amount of the signal's resource available at the last observation: bytes for memory and filesystem signals, a count for inodesFree and pid.available.
# TYPE evictd_signal_available gauge
evictd_signal_available{signal="memory.available"} 8.388608e+07
# HELP evictd_threshold Deprecated: use evictd_threshold_bytes, _inodes, _pids and _ratio. Eviction threshold as an absolute quantity in the signal's unit (percentages resolved against capacity): the node is under pressure while evictd_signal_available is below it; for the memory.pressure.* signals a stall ratio (0-1), under pressure while evictd_memory_pressure_stall_ratio is above it.
# TYPE evictd_threshold gauge
evictd_threshold{kind="hard",signal="memory.pressure.full.avg10"} 0.2
`,
		},
		{
			name: "SetStallLocal: 1 for a local stall, 0 for the node's, nothing for other signals; ForgetObservation deletes it",
			do: func(m *Metrics) {
				m.SetStallLocal(signals.MemoryPressureSomeAvg10, true)
				m.SetStallLocal(signals.MemoryPressureFullAvg60, false)
				m.SetStallLocal(signals.MemoryPressureFullAvg300, true)
				m.SetStallLocal(signals.MemoryAvailable, true)
				m.ForgetObservation(signals.MemoryPressureFullAvg300)
			},
			collect: func(m *Metrics) prometheus.Collector { return collectors(m.locality) },
			want: `
# HELP evictd_memory_pressure_stall_local 1 when the last reading of the memory stall average (kind, window) was local: over its window the kernel reclaimed no memory for the node as a whole (/proc/vmstat pgscan_kswapd + pgscan_direct) and kubepods reached no limit of its own (memory.events.local high/max, or memory.failcnt on cgroup v1), so cgroups held at their own limits stalled and no stall threshold is met on it; 0 when the stall was the node's.
# TYPE evictd_memory_pressure_stall_local gauge
evictd_memory_pressure_stall_local{kind="full",window="60s"} 0
evictd_memory_pressure_stall_local{kind="some",window="10s"} 1
`,
		},
		{
			name: "ForgetObservation of a stall signal deletes its ratio and thresholds",
			do: func(m *Metrics) {
				m.SetObservation(signals.MemoryPressureFullAvg10, 3550, signals.StallScale)
				m.SetObservation(signals.MemoryPressureFullAvg60, 1200, signals.StallScale)
				m.SetThreshold(signals.MemoryPressureFullAvg10, KindHard, 2000, true)
				m.ForgetObservation(signals.MemoryPressureFullAvg10)
			},
			collect: func(m *Metrics) prometheus.Collector { return collectors(m.stall, m.threshold) },
			want: `
# HELP evictd_memory_pressure_stall_ratio Share of time, averaged over the window, in which some task (kind=some) or every non-idle task (kind=full) of the node was stalled waiting for memory (PSI, /proc/pressure/memory), at the last observation.
# TYPE evictd_memory_pressure_stall_ratio gauge
evictd_memory_pressure_stall_ratio{kind="full",window="60s"} 0.12
`,
		},
		{
			name: "ForgetObservation deletes everything read from the signal",
			do: func(m *Metrics) {
				for _, s := range []signals.Signal{signals.MemoryAvailable, signals.NodeFsAvailable} {
					m.SetObservation(s, 100, 1000)
					m.SetObservationAge(s, 0.5)
					m.SetThreshold(s, KindHard, 10, false)
					m.SetThreshold(s, KindSoft, 20, true)
				}
				m.ForgetObservation(signals.NodeFsAvailable)
				// Forgetting a signal never observed is harmless.
				m.ForgetObservation(signals.PIDAvailable)
			},
			collect: func(m *Metrics) prometheus.Collector {
				return collectors(m.available, m.capacity, m.obsAge, m.threshold, m.thrMet)
			},
			want: `
# HELP evictd_signal_available Deprecated: use evictd_signal_available_bytes, _inodes and _pids. Amount of the signal's resource available at the last observation: bytes for memory and filesystem signals, a count for inodesFree and pid.available.
# TYPE evictd_signal_available gauge
evictd_signal_available{signal="memory.available"} 100
# HELP evictd_signal_capacity Deprecated: use evictd_signal_capacity_bytes, _inodes and _pids. Capacity of the signal's resource at the last observation: bytes for memory and filesystem signals, a count for inodesFree and pid.available.
# TYPE evictd_signal_capacity gauge
evictd_signal_capacity{signal="memory.available"} 1000
# HELP evictd_signal_observation_age_seconds Age of the signal's last observation when the last pass used it.
# TYPE evictd_signal_observation_age_seconds gauge
evictd_signal_observation_age_seconds{signal="memory.available"} 0.5
# HELP evictd_threshold Deprecated: use evictd_threshold_bytes, _inodes, _pids and _ratio. Eviction threshold as an absolute quantity in the signal's unit (percentages resolved against capacity): the node is under pressure while evictd_signal_available is below it; for the memory.pressure.* signals a stall ratio (0-1), under pressure while evictd_memory_pressure_stall_ratio is above it.
# TYPE evictd_threshold gauge
evictd_threshold{kind="hard",signal="memory.available"} 10
evictd_threshold{kind="soft",signal="memory.available"} 20
# HELP evictd_threshold_met 1 if the threshold was met at the last pass (minimum reclaim included), else 0.
# TYPE evictd_threshold_met gauge
evictd_threshold_met{kind="hard",signal="memory.available"} 0
evictd_threshold_met{kind="soft",signal="memory.available"} 1
`,
		},
		{
			name: "SetObservationAge",
			do: func(m *Metrics) {
				m.SetObservationAge(signals.ImageFsAvailable, 12.25)
			},
			collect: func(m *Metrics) prometheus.Collector { return m.obsAge },
			want: `
# HELP evictd_signal_observation_age_seconds Age of the signal's last observation when the last pass used it.
# TYPE evictd_signal_observation_age_seconds gauge
evictd_signal_observation_age_seconds{signal="imagefs.available"} 12.25
`,
		},
		{
			name: "IncSignalError",
			do: func(m *Metrics) {
				m.IncSignalError(signals.NodeFsInodesFree)
				m.IncSignalError(signals.NodeFsInodesFree)
			},
			collect: func(m *Metrics) prometheus.Collector {
				return m.sigErrors.WithLabelValues(string(signals.NodeFsInodesFree))
			},
			want: `
# HELP evictd_signal_errors_total Passes in which the signal could not be read (it could then trigger no eviction).
# TYPE evictd_signal_errors_total counter
evictd_signal_errors_total{signal="nodefs.inodesFree"} 2
`,
		},
		{
			name: "SetThreshold",
			do: func(m *Metrics) {
				m.SetThreshold(signals.MemoryAvailable, KindHard, 100<<20, true)
				m.SetThreshold(signals.NodeFsInodesFree, KindSoft, 50000, false)
				m.SetThreshold(signals.NodeFsInodesFree, KindSoft, 50000, true)
			},
			collect: func(m *Metrics) prometheus.Collector { return collectors(m.threshold, m.thrMet) },
			want: `
# HELP evictd_threshold Deprecated: use evictd_threshold_bytes, _inodes, _pids and _ratio. Eviction threshold as an absolute quantity in the signal's unit (percentages resolved against capacity): the node is under pressure while evictd_signal_available is below it; for the memory.pressure.* signals a stall ratio (0-1), under pressure while evictd_memory_pressure_stall_ratio is above it.
# TYPE evictd_threshold gauge
evictd_threshold{kind="hard",signal="memory.available"} 1.048576e+08
evictd_threshold{kind="soft",signal="nodefs.inodesFree"} 50000
# HELP evictd_threshold_met 1 if the threshold was met at the last pass (minimum reclaim included), else 0.
# TYPE evictd_threshold_met gauge
evictd_threshold_met{kind="hard",signal="memory.available"} 1
evictd_threshold_met{kind="soft",signal="nodefs.inodesFree"} 1
`,
		},
		{
			name: "SetPressure",
			do: func(m *Metrics) {
				m.SetPressure(signals.MemoryPressure, true)
				m.SetPressure(signals.DiskPressure, true)
				m.SetPressure(signals.DiskPressure, false)
				m.SetPressure(signals.PIDPressure, false)
			},
			collect: func(m *Metrics) prometheus.Collector { return m.pressure },
			want: `
# HELP evictd_node_pressure 1 while evictd reports the node under this kind of pressure (condition state, after the transition period), else 0.
# TYPE evictd_node_pressure gauge
evictd_node_pressure{pressure="disk"} 0
evictd_node_pressure{pressure="memory"} 1
evictd_node_pressure{pressure="pid"} 0
`,
		},
		{
			name: "ObserveDecision without times counts the decision only",
			do: func(m *Metrics) {
				m.ObserveDecision(Decision{Signal: signals.MemoryAvailable, Outcome: decide.OutcomeEvict, At: t0})
				m.ObserveDecision(Decision{Signal: signals.MemoryAvailable, Outcome: decide.OutcomeEvict, At: t0})
				m.ObserveDecision(Decision{Signal: signals.MemoryAvailable, Outcome: OutcomeDryRun, At: t0})
			},
			collect: func(m *Metrics) prometheus.Collector {
				return collectors(
					m.decisions.WithLabelValues(string(signals.MemoryAvailable), string(decide.OutcomeEvict)),
					m.decisions.WithLabelValues(string(signals.MemoryAvailable), string(OutcomeDryRun)),
					m.decisions.WithLabelValues(string(signals.MemoryAvailable), string(decide.OutcomeNoEvictablePod)),
					m.statsAge, m.detection,
				)
			},
			want: `
# HELP evictd_decisions_total Eviction decisions taken, by starved signal and outcome: evict (a pod was chosen), dry-run (a pod was chosen, in dry-run), none-evictable (no pod may be evicted), reclaim-sufficient (node-level reclaim was enough), reclaim-settling (node-level reclaim removed some; waiting for the runtime to free it).
# TYPE evictd_decisions_total counter
evictd_decisions_total{outcome="dry-run",signal="memory.available"} 1
evictd_decisions_total{outcome="evict",signal="memory.available"} 2
evictd_decisions_total{outcome="none-evictable",signal="memory.available"} 0
`,
		},
		{
			name: "IncAPIError",
			do: func(m *Metrics) {
				m.IncAPIError(APIPodEvict)
				m.IncAPIError(APIPodEvict)
				m.IncAPIError(APINodePatch)
			},
			collect: func(m *Metrics) prometheus.Collector {
				return collectors(m.apiErrors.WithLabelValues(string(APIPodEvict)), m.apiErrors.WithLabelValues(string(APINodePatch)))
			},
			want: `
# HELP evictd_api_errors_total Requests to the API server that failed, by verb: node_patch (PATCH of its conditions), node_patch_taints (PATCH of its taints, with the node's resourceVersion), lease_renew (create, update or GET of its Lease), pod_get (GET of a pod), pod_evict (POST of pods/eviction), pod_delete (DELETE of a pod, a hard eviction's), pod_patch_status (PATCH of pods/status).
# TYPE evictd_api_errors_total counter
evictd_api_errors_total{verb="node_patch"} 1
evictd_api_errors_total{verb="pod_evict"} 2
`,
		},
		{
			name: "IncEviction and IncNotIssued: evictions issued apart from the attempts that issued none",
			do: func(m *Metrics) {
				m.IncNotIssued(signals.NodeFsAvailable, NotIssuedPDBBlocked)
				m.IncEviction(signals.NodeFsAvailable, ResultEvicted)
				m.IncEviction(signals.MemoryAvailable, ResultStoppedLocally)
				m.IncNotIssued(signals.MemoryAvailable, NotIssuedDryRun)
				m.IncNotIssued(signals.MemoryAvailable, NotIssuedDryRun)
			},
			collect: func(m *Metrics) prometheus.Collector { return collectors(m.evictions, m.notIssued) },
			want: `
# HELP evictd_evictions_total Pod evictions issued, by starved signal (eviction_signal; signal, the same value, is deprecated and goes in v0.2.0) and how they were issued: evicted (the API server accepted it), stopped-locally (the containers were stopped through the runtime: the API server did not answer and the eviction is owed, or evictd runs without one). Attempts that issued none are in evictd_evictions_not_issued_total.
# TYPE evictd_evictions_total counter
evictd_evictions_total{eviction_signal="memory.available",result="stopped-locally",signal="memory.available"} 1
evictd_evictions_total{eviction_signal="nodefs.available",result="evicted",signal="nodefs.available"} 1
# HELP evictd_evictions_not_issued_total Pod evictions attempted but not issued, by starved signal (eviction_signal) and reason: pdb-blocked (a PodDisruptionBudget refused it), failed (any other error), dry-run (--dry-run, or no API server and no --standalone-stop), not-acted (no API server, and a stop through the runtime cannot carry it out).
# TYPE evictd_evictions_not_issued_total counter
evictd_evictions_not_issued_total{eviction_signal="memory.available",reason="dry-run"} 2
evictd_evictions_not_issued_total{eviction_signal="nodefs.available",reason="pdb-blocked"} 1
`,
		},
		{
			name: "safety limits: evictions withheld, cap reached, evictions in the last hour",
			do: func(m *Metrics) {
				m.IncWithheld(WithheldHourlyCap)
				m.IncWithheld(WithheldHourlyCap)
				m.IncWithheld(WithheldRateLimit)
				m.IncWithheld(WithheldInFlight)
				m.IncCapReached()
				m.ObservePass(Pass{Trigger: TriggerTick, EvictionsInLastHour: 7})
				m.ObservePass(Pass{Trigger: TriggerTick, EvictionsInLastHour: 5})
			},
			collect: func(m *Metrics) prometheus.Collector { return collectors(m.withheld, m.capHits, m.lastHour) },
			want: `
# HELP evictd_evictions_withheld_total Evictions decided but not issued because of a safety limit, by reason: hourly-cap (--max-evictions-per-hour), rate-limit (--local-storage-eviction-qps and --local-storage-eviction-burst), eviction-in-flight (a pod evictd evicted is still terminating).
# TYPE evictd_evictions_withheld_total counter
evictd_evictions_withheld_total{reason="eviction-in-flight"} 1
evictd_evictions_withheld_total{reason="hourly-cap"} 2
evictd_evictions_withheld_total{reason="rate-limit"} 1
# HELP evictd_eviction_cap_reached_total Times --max-evictions-per-hour was reached: counted once each time the cap withholds an eviction after having had room.
# TYPE evictd_eviction_cap_reached_total counter
evictd_eviction_cap_reached_total 1
# HELP evictd_evictions_in_last_hour Evictions issued (evicted or stopped locally) in the sliding hour before the last pass, the count --max-evictions-per-hour caps.
# TYPE evictd_evictions_in_last_hour gauge
evictd_evictions_in_last_hour 5
`,
		},
		{
			name: "a negative observation age (the clock stepped back) is exported as 0",
			do: func(m *Metrics) {
				m.SetObservationAge(signals.MemoryAvailable, -30)
				m.SetObservationAge(signals.PIDAvailable, 2.5)
			},
			collect: func(m *Metrics) prometheus.Collector { return m.obsAge },
			want: `
# HELP evictd_signal_observation_age_seconds Age of the signal's last observation when the last pass used it.
# TYPE evictd_signal_observation_age_seconds gauge
evictd_signal_observation_age_seconds{signal="memory.available"} 0
evictd_signal_observation_age_seconds{signal="pid.available"} 2.5
`,
		},
		{
			name: "ObservePass",
			do: func(m *Metrics) {
				m.ObservePass(Pass{Trigger: TriggerTick, Duration: 150 * time.Microsecond, EvictionsInLastHour: 1})
				m.ObservePass(Pass{Trigger: TriggerTick, Duration: 30 * time.Millisecond, EvictionsInLastHour: 2})
				m.ObservePass(Pass{Trigger: TriggerWake, Duration: 20 * time.Second, EvictionsInLastHour: 1})
			},
			collect: func(m *Metrics) prometheus.Collector { return collectors(m.passDur, m.passes, m.lastHour) },
			want: `
# HELP evictd_pass_duration_seconds Duration of one pass of the loop: observe, decide, act.
# TYPE evictd_pass_duration_seconds histogram
evictd_pass_duration_seconds_bucket{le="0.0001"} 0
evictd_pass_duration_seconds_bucket{le="0.00025"} 1
evictd_pass_duration_seconds_bucket{le="0.0005"} 1
evictd_pass_duration_seconds_bucket{le="0.001"} 1
evictd_pass_duration_seconds_bucket{le="0.0025"} 1
evictd_pass_duration_seconds_bucket{le="0.005"} 1
evictd_pass_duration_seconds_bucket{le="0.01"} 1
evictd_pass_duration_seconds_bucket{le="0.025"} 1
evictd_pass_duration_seconds_bucket{le="0.05"} 2
evictd_pass_duration_seconds_bucket{le="0.1"} 2
evictd_pass_duration_seconds_bucket{le="0.25"} 2
evictd_pass_duration_seconds_bucket{le="0.5"} 2
evictd_pass_duration_seconds_bucket{le="1"} 2
evictd_pass_duration_seconds_bucket{le="2.5"} 2
evictd_pass_duration_seconds_bucket{le="5"} 2
evictd_pass_duration_seconds_bucket{le="10"} 2
evictd_pass_duration_seconds_bucket{le="+Inf"} 3
evictd_pass_duration_seconds_sum 20.03015
evictd_pass_duration_seconds_count 3
# HELP evictd_passes_total Passes of the loop, by what started them: start (the first pass), tick (the housekeeping interval), wake (a wake-up source, or after an eviction), deadline (a grace period, transition period or wait ending before the next tick).
# TYPE evictd_passes_total counter
evictd_passes_total{trigger="tick"} 2
evictd_passes_total{trigger="wake"} 1
# HELP evictd_evictions_in_last_hour Evictions issued (evicted or stopped locally) in the sliding hour before the last pass, the count --max-evictions-per-hour caps.
# TYPE evictd_evictions_in_last_hour gauge
evictd_evictions_in_last_hour 1
`,
		},
		{
			name: "IncWakeup",
			do: func(m *Metrics) {
				m.IncWakeup(WakeupMemcg)
				m.IncWakeup(WakeupMemcg)
				m.IncWakeup(WakeupFastPoll)
			},
			collect: func(m *Metrics) prometheus.Collector { return m.wakeups },
			want: `
# HELP evictd_wakeups_total Wake-ups of the loop by source: memcg (cgroup v1 threshold notification), psi (pressure stall trigger), memory-events (cgroup v2 memory.events), fast-poll (working set polled near a memory threshold). Wake-ups arriving while a pass is pending share one pass.
# TYPE evictd_wakeups_total counter
evictd_wakeups_total{source="fast-poll"} 1
evictd_wakeups_total{source="memcg"} 2
`,
		},
		{
			name: "ObserveDecision records the age of its observation; a negative age counts as 0",
			do: func(m *Metrics) {
				for _, age := range []time.Duration{3 * time.Millisecond, -time.Second, 15 * time.Second} {
					m.ObserveDecision(Decision{Signal: signals.MemoryAvailable, Outcome: decide.OutcomeEvict, At: t0, Observed: t0.Add(-age)})
				}
			},
			collect: func(m *Metrics) prometheus.Collector { return m.statsAge },
			want: `
# HELP evictd_stats_age_seconds Time between the observation an eviction decision was based on and the decision.
# TYPE evictd_stats_age_seconds histogram
evictd_stats_age_seconds_bucket{signal="memory.available",le="0.001"} 1
evictd_stats_age_seconds_bucket{signal="memory.available",le="0.005"} 2
evictd_stats_age_seconds_bucket{signal="memory.available",le="0.01"} 2
evictd_stats_age_seconds_bucket{signal="memory.available",le="0.05"} 2
evictd_stats_age_seconds_bucket{signal="memory.available",le="0.1"} 2
evictd_stats_age_seconds_bucket{signal="memory.available",le="0.5"} 2
evictd_stats_age_seconds_bucket{signal="memory.available",le="1"} 2
evictd_stats_age_seconds_bucket{signal="memory.available",le="2.5"} 2
evictd_stats_age_seconds_bucket{signal="memory.available",le="5"} 2
evictd_stats_age_seconds_bucket{signal="memory.available",le="10"} 2
evictd_stats_age_seconds_bucket{signal="memory.available",le="20"} 3
evictd_stats_age_seconds_bucket{signal="memory.available",le="30"} 3
evictd_stats_age_seconds_bucket{signal="memory.available",le="60"} 3
evictd_stats_age_seconds_bucket{signal="memory.available",le="+Inf"} 3
evictd_stats_age_seconds_sum{signal="memory.available"} 15.003
evictd_stats_age_seconds_count{signal="memory.available"} 3
`,
		},
		{
			name: "ObserveDecision records the time since its threshold was first met",
			do: func(m *Metrics) {
				for _, since := range []time.Duration{400 * time.Millisecond, 90 * time.Second} {
					m.ObserveDecision(Decision{Signal: signals.PIDAvailable, Outcome: decide.OutcomeEvict, At: t0, FirstMet: t0.Add(-since)})
				}
			},
			collect: func(m *Metrics) prometheus.Collector { return m.detection },
			want: `
# HELP evictd_detection_latency_seconds Time from a threshold first being observed met to the eviction decision it led to.
# TYPE evictd_detection_latency_seconds histogram
evictd_detection_latency_seconds_bucket{signal="pid.available",le="0.001"} 0
evictd_detection_latency_seconds_bucket{signal="pid.available",le="0.01"} 0
evictd_detection_latency_seconds_bucket{signal="pid.available",le="0.1"} 0
evictd_detection_latency_seconds_bucket{signal="pid.available",le="0.5"} 1
evictd_detection_latency_seconds_bucket{signal="pid.available",le="1"} 1
evictd_detection_latency_seconds_bucket{signal="pid.available",le="2.5"} 1
evictd_detection_latency_seconds_bucket{signal="pid.available",le="5"} 1
evictd_detection_latency_seconds_bucket{signal="pid.available",le="10"} 1
evictd_detection_latency_seconds_bucket{signal="pid.available",le="20"} 1
evictd_detection_latency_seconds_bucket{signal="pid.available",le="30"} 1
evictd_detection_latency_seconds_bucket{signal="pid.available",le="60"} 1
evictd_detection_latency_seconds_bucket{signal="pid.available",le="120"} 2
evictd_detection_latency_seconds_bucket{signal="pid.available",le="300"} 2
evictd_detection_latency_seconds_bucket{signal="pid.available",le="600"} 2
evictd_detection_latency_seconds_bucket{signal="pid.available",le="1800"} 2
evictd_detection_latency_seconds_bucket{signal="pid.available",le="+Inf"} 2
evictd_detection_latency_seconds_sum{signal="pid.available"} 90.4
evictd_detection_latency_seconds_count{signal="pid.available"} 2
`,
		},
		{
			name: "ObserveIssueLatency",
			do: func(m *Metrics) {
				m.ObserveIssueLatency(signals.MemoryAvailable, 3906250*time.Nanosecond) // 1/256 s, exact in a float
				m.ObserveIssueLatency(signals.MemoryAvailable, 31250*time.Microsecond)  // 1/32 s
				m.ObserveIssueLatency(signals.MemoryAvailable, -time.Millisecond)
			},
			collect: func(m *Metrics) prometheus.Collector { return m.issue },
			want: `
# HELP evictd_eviction_issue_latency_seconds Time from an eviction decision to the eviction being issued (the Eviction API accepted it, or a hard eviction's delete returned).
# TYPE evictd_eviction_issue_latency_seconds histogram
evictd_eviction_issue_latency_seconds_bucket{signal="memory.available",le="0.001"} 1
evictd_eviction_issue_latency_seconds_bucket{signal="memory.available",le="0.0025"} 1
evictd_eviction_issue_latency_seconds_bucket{signal="memory.available",le="0.005"} 2
evictd_eviction_issue_latency_seconds_bucket{signal="memory.available",le="0.01"} 2
evictd_eviction_issue_latency_seconds_bucket{signal="memory.available",le="0.025"} 2
evictd_eviction_issue_latency_seconds_bucket{signal="memory.available",le="0.05"} 3
evictd_eviction_issue_latency_seconds_bucket{signal="memory.available",le="0.1"} 3
evictd_eviction_issue_latency_seconds_bucket{signal="memory.available",le="0.25"} 3
evictd_eviction_issue_latency_seconds_bucket{signal="memory.available",le="0.5"} 3
evictd_eviction_issue_latency_seconds_bucket{signal="memory.available",le="1"} 3
evictd_eviction_issue_latency_seconds_bucket{signal="memory.available",le="2.5"} 3
evictd_eviction_issue_latency_seconds_bucket{signal="memory.available",le="5"} 3
evictd_eviction_issue_latency_seconds_bucket{signal="memory.available",le="10"} 3
evictd_eviction_issue_latency_seconds_bucket{signal="memory.available",le="30"} 3
evictd_eviction_issue_latency_seconds_bucket{signal="memory.available",le="+Inf"} 3
evictd_eviction_issue_latency_seconds_sum{signal="memory.available"} 0.03515625
evictd_eviction_issue_latency_seconds_count{signal="memory.available"} 3
`,
		},
		{
			name: "ObserveSignalLatency: by signal and path",
			do: func(m *Metrics) {
				m.ObserveSignalLatency(signals.MemoryAvailable, SignalDirect, 200*time.Microsecond)
				m.ObserveSignalLatency(signals.MemoryAvailable, SignalRuntime, 31250*time.Microsecond) // 1/32 s
			},
			collect: func(m *Metrics) prometheus.Collector { return m.signalled },
			want: `
# HELP evictd_eviction_signal_latency_seconds Time from a hard eviction's decision to the first stop signal of the pod's containers, by path: direct (each container's stop signal, as the runtime reports it (SIGTERM where it has not said), sent by evictd itself to the containers' main processes through pidfds, a hard eviction of a pod whose restartPolicy is Always), runtime (the stop asked of the container runtime through the CRI; the runtime's own kill follows, about 25 ms later on containerd).
# TYPE evictd_eviction_signal_latency_seconds histogram
evictd_eviction_signal_latency_seconds_bucket{path="direct",signal="memory.available",le="0.0001"} 0
evictd_eviction_signal_latency_seconds_bucket{path="direct",signal="memory.available",le="0.00025"} 1
evictd_eviction_signal_latency_seconds_bucket{path="direct",signal="memory.available",le="0.0005"} 1
evictd_eviction_signal_latency_seconds_bucket{path="direct",signal="memory.available",le="0.001"} 1
evictd_eviction_signal_latency_seconds_bucket{path="direct",signal="memory.available",le="0.0025"} 1
evictd_eviction_signal_latency_seconds_bucket{path="direct",signal="memory.available",le="0.005"} 1
evictd_eviction_signal_latency_seconds_bucket{path="direct",signal="memory.available",le="0.01"} 1
evictd_eviction_signal_latency_seconds_bucket{path="direct",signal="memory.available",le="0.025"} 1
evictd_eviction_signal_latency_seconds_bucket{path="direct",signal="memory.available",le="0.05"} 1
evictd_eviction_signal_latency_seconds_bucket{path="direct",signal="memory.available",le="0.1"} 1
evictd_eviction_signal_latency_seconds_bucket{path="direct",signal="memory.available",le="0.25"} 1
evictd_eviction_signal_latency_seconds_bucket{path="direct",signal="memory.available",le="0.5"} 1
evictd_eviction_signal_latency_seconds_bucket{path="direct",signal="memory.available",le="1"} 1
evictd_eviction_signal_latency_seconds_bucket{path="direct",signal="memory.available",le="2.5"} 1
evictd_eviction_signal_latency_seconds_bucket{path="direct",signal="memory.available",le="5"} 1
evictd_eviction_signal_latency_seconds_bucket{path="direct",signal="memory.available",le="+Inf"} 1
evictd_eviction_signal_latency_seconds_sum{path="direct",signal="memory.available"} 0.0002
evictd_eviction_signal_latency_seconds_count{path="direct",signal="memory.available"} 1
evictd_eviction_signal_latency_seconds_bucket{path="runtime",signal="memory.available",le="0.0001"} 0
evictd_eviction_signal_latency_seconds_bucket{path="runtime",signal="memory.available",le="0.00025"} 0
evictd_eviction_signal_latency_seconds_bucket{path="runtime",signal="memory.available",le="0.0005"} 0
evictd_eviction_signal_latency_seconds_bucket{path="runtime",signal="memory.available",le="0.001"} 0
evictd_eviction_signal_latency_seconds_bucket{path="runtime",signal="memory.available",le="0.0025"} 0
evictd_eviction_signal_latency_seconds_bucket{path="runtime",signal="memory.available",le="0.005"} 0
evictd_eviction_signal_latency_seconds_bucket{path="runtime",signal="memory.available",le="0.01"} 0
evictd_eviction_signal_latency_seconds_bucket{path="runtime",signal="memory.available",le="0.025"} 0
evictd_eviction_signal_latency_seconds_bucket{path="runtime",signal="memory.available",le="0.05"} 1
evictd_eviction_signal_latency_seconds_bucket{path="runtime",signal="memory.available",le="0.1"} 1
evictd_eviction_signal_latency_seconds_bucket{path="runtime",signal="memory.available",le="0.25"} 1
evictd_eviction_signal_latency_seconds_bucket{path="runtime",signal="memory.available",le="0.5"} 1
evictd_eviction_signal_latency_seconds_bucket{path="runtime",signal="memory.available",le="1"} 1
evictd_eviction_signal_latency_seconds_bucket{path="runtime",signal="memory.available",le="2.5"} 1
evictd_eviction_signal_latency_seconds_bucket{path="runtime",signal="memory.available",le="5"} 1
evictd_eviction_signal_latency_seconds_bucket{path="runtime",signal="memory.available",le="+Inf"} 1
evictd_eviction_signal_latency_seconds_sum{path="runtime",signal="memory.available"} 0.03125
evictd_eviction_signal_latency_seconds_count{path="runtime",signal="memory.available"} 1
`,
		},
		{
			name: "ObserveReclaim: failed when the action has an error; a negative amount freed adds nothing",
			do: func(m *Metrics) {
				m.ObserveReclaim(decide.ReclaimAction{Kind: decide.ReclaimContainers, Removed: 3, FreedBytes: 100 << 20})
				m.ObserveReclaim(decide.ReclaimAction{Kind: decide.ReclaimImages, Err: errors.New("runtime down")})
				m.ObserveReclaim(decide.ReclaimAction{Kind: decide.ReclaimImages, Removed: 1, FreedBytes: -4096})
			},
			collect: func(m *Metrics) prometheus.Collector { return collectors(m.reclaims, m.reclaimed) },
			want: `
# HELP evictd_reclaim_total Node-level reclaim actions, by kind: containers (dead containers and sandboxes), images (unused images); and result: ok, failed (wholly or in part).
# TYPE evictd_reclaim_total counter
evictd_reclaim_total{kind="containers",result="ok"} 1
evictd_reclaim_total{kind="images",result="failed"} 1
evictd_reclaim_total{kind="images",result="ok"} 1
# HELP evictd_reclaimed_bytes_total Bytes that node-level reclaim freed on the filesystem, measured with statfs before and after, by kind: containers (dead containers and sandboxes), images (unused images).
# TYPE evictd_reclaimed_bytes_total counter
evictd_reclaimed_bytes_total{kind="containers"} 1.048576e+08
evictd_reclaimed_bytes_total{kind="images"} 0
`,
		},
		{
			name: "SetBuild",
			do: func(m *Metrics) {
				m.SetBuild("v0.1.0", "0123abc")
				m.SetBuild("v0.2.0", "4567def-dirty") // replaces, never adds a second series
			},
			collect: func(m *Metrics) prometheus.Collector { return m.buildInfo },
			want: `
# HELP evictd_build_info Always 1; the labels say which evictd build is running: its version, the VCS revision it was built from, and the Go version.
# TYPE evictd_build_info gauge
evictd_build_info{goversion="` + runtime.Version() + `",revision="4567def-dirty",version="v0.2.0"} 1
`,
		},
		{
			name:    "SetBuild without a version or revision",
			do:      func(m *Metrics) { m.SetBuild("", "") },
			collect: func(m *Metrics) prometheus.Collector { return m.buildInfo },
			want: `
# HELP evictd_build_info Always 1; the labels say which evictd build is running: its version, the VCS revision it was built from, and the Go version.
# TYPE evictd_build_info gauge
evictd_build_info{goversion="` + runtime.Version() + `",revision="unknown",version="unknown"} 1
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(prometheus.NewRegistry())
			tt.do(m)
			if err := testutil.CollectAndCompare(tt.collect(m), strings.NewReader(tt.want)); err != nil {
				t.Error(err)
			}
		})
	}
}

// t0 is a time for decisions.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// collectors joins several collectors into one for CollectAndCompare.
type multiCollector []prometheus.Collector

func collectors(cs ...prometheus.Collector) prometheus.Collector { return multiCollector(cs) }

func (mc multiCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range mc {
		c.Describe(ch)
	}
}

func (mc multiCollector) Collect(ch chan<- prometheus.Metric) {
	for _, c := range mc {
		c.Collect(ch)
	}
}

package metrics

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/evictd/evictd/internal/buildinfo"
	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/signals"
)

// Histogram buckets, in seconds.
var (
	// A pass reads a few files and lists pods: from 100µs on an idle
	// fixture to seconds when the API server or the runtime is slow.
	passBuckets = []float64{
		0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
		0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
	}
	// Observations are normally taken in the pass that decides on them
	// (milliseconds); older ones mean cached or stuck stats, up to a few
	// housekeeping intervals (10s each by default).
	statsAgeBuckets = []float64{
		0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 20, 30, 60,
	}
	// Hard thresholds act within a pass or a wake-up (milliseconds to one
	// housekeeping interval); soft ones wait out their grace period, which
	// operators set in minutes.
	detectionBuckets = []float64{
		0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1800,
	}
	// Issuing an eviction is a pod read and one or two API calls after the
	// pass's reads (milliseconds), or seconds when the API server is slow
	// or node-level reclaim ran first.
	issueBuckets = []float64{
		0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
	}
)

// Metrics holds every evictd_* collector. Its methods are safe for
// concurrent use, and are no-ops on a nil *Metrics so that code paths without
// metrics (evictd simulate, tests) need no special case.
type Metrics struct {
	available *prometheus.GaugeVec
	capacity  *prometheus.GaugeVec
	stall     *prometheus.GaugeVec
	locality  *prometheus.GaugeVec // whether each stall average was local (stall.go)
	obsAge    *prometheus.GaugeVec
	sigErrors *prometheus.CounterVec
	threshold *prometheus.GaugeVec
	thrMet    *prometheus.GaugeVec
	pressure  *prometheus.GaugeVec
	decisions *prometheus.CounterVec
	evictions *prometheus.CounterVec
	notIssued *prometheus.CounterVec
	apiErrors *prometheus.CounterVec
	rtErrors  *prometheus.CounterVec
	reclaims  *prometheus.CounterVec
	reclaimed *prometheus.CounterVec
	passDur   prometheus.Histogram
	passes    *prometheus.CounterVec
	wakeups   *prometheus.CounterVec
	statsAge  *prometheus.HistogramVec
	detection *prometheus.HistogramVec
	issue     *prometheus.HistogramVec
	owed      prometheus.Gauge
	buildInfo *prometheus.GaugeVec
	withheld  *prometheus.CounterVec
	capHits   prometheus.Counter
	lastHour  prometheus.Gauge
	byUnit    map[unit]*unitGauges
	refused   *prometheus.CounterVec
	expiry    *expiryCollector
	reviews   *prometheus.CounterVec
	reviewDur *prometheus.HistogramVec
	renewals  *prometheus.CounterVec
	walksCut  *prometheus.CounterVec
	records   *prometheus.CounterVec
	signalled *prometheus.HistogramVec
	diskStale prometheus.Gauge
	shadow    memoryShadow // memory.available by other formulas (shadow.go)
	// exhaustion are the release and relief times and the predicted
	// decisions (exhaustion.go).
	exhaustion exhaustion
	oomKills   *prometheus.CounterVec

	// err holds what New could not register.
	err error
}

// New creates evictd's metrics and registers them on reg, never on the
// global registry. A nil reg registers nothing (the metrics still work,
// unexported). If a collector of the same name and labels is already on reg
// (New called twice on one registry), the existing one is shared; any other
// registration failure is kept for Err, and that metric goes unexported.
func New(reg prometheus.Registerer) *Metrics {
	// Each signal's reading and thresholds go to the families of its unit
	// (units.go): evictd_signal_available_bytes, _inodes and _pids, and so
	// on, so that no panel or sum adds bytes to inodes; a threshold is
	// compared with the reading of the same unit, matched on signal.
	// evictd_signal_available, evictd_signal_capacity and evictd_threshold
	// carry every unit in one family, told apart by the signal label only:
	// they are deprecated, kept while dashboards and alerts move to the
	// unit families, and to be removed in a later release.
	m := &Metrics{
		available: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "evictd_signal_available",
			Help: "Deprecated: use evictd_signal_available_bytes, _inodes and _pids. Amount of the signal's resource available at the last observation: bytes for memory and filesystem signals, a count for inodesFree and pid.available.",
		}, []string{"signal"}),
		capacity: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "evictd_signal_capacity",
			Help: "Deprecated: use evictd_signal_capacity_bytes, _inodes and _pids. Capacity of the signal's resource at the last observation: bytes for memory and filesystem signals, a count for inodesFree and pid.available.",
		}, []string{"signal"}),
		stall: newStallGauge(),
		obsAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "evictd_signal_observation_age_seconds",
			Help: "Age of the signal's last observation when the last pass used it.",
		}, []string{"signal"}),
		locality: newStallLocalGauge(),
		sigErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "evictd_signal_errors_total",
			Help: "Passes in which the signal could not be read (it could then trigger no eviction).",
		}, []string{"signal"}),
		threshold: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "evictd_threshold",
			Help: "Deprecated: use evictd_threshold_bytes, _inodes, _pids and _ratio. Eviction threshold as an absolute quantity in the signal's unit (percentages resolved against capacity): the node is under pressure while evictd_signal_available is below it; for the memory.pressure.* signals a stall ratio (0-1), under pressure while evictd_memory_pressure_stall_ratio is above it.",
		}, []string{"signal", "kind"}),
		thrMet: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "evictd_threshold_met",
			Help: "1 if the threshold was met at the last pass (minimum reclaim included), else 0.",
		}, []string{"signal", "kind"}),
		pressure: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "evictd_node_pressure",
			Help: "1 while evictd reports the node under this kind of pressure (condition state, after the transition period), else 0.",
		}, []string{"pressure"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "evictd_decisions_total",
			Help: "Eviction decisions taken, by starved signal and outcome: " + listed(outcomes) + ".",
		}, []string{"signal", "outcome"}),
		// The starved signal is eviction_signal, as in the kubelet's
		// kubelet_evictions, so that the two join; signal, the same value,
		// is deprecated and goes in v0.2.0.
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "evictd_evictions_total",
			Help: "Pod evictions issued, by starved signal (eviction_signal; signal, the same value, is deprecated and goes in v0.2.0) and how they were issued: " + listed(results) + ". Attempts that issued none are in evictd_evictions_not_issued_total.",
		}, []string{"eviction_signal", "signal", "result"}),
		notIssued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "evictd_evictions_not_issued_total",
			Help: "Pod evictions attempted but not issued, by starved signal (eviction_signal) and reason: " + listed(notIssuedReasons) + ".",
		}, []string{"eviction_signal", "reason"}),
		rtErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "evictd_runtime_errors_total",
			Help: "Calls to the container runtime (CRI) that failed, by operation: " + listed(runtimeOperations) + ". The image filesystem counts in evictd_signal_errors_total, reclaim in evictd_reclaim_total.",
		}, []string{"operation"}),
		apiErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "evictd_api_errors_total",
			Help: "Requests to the API server that failed, by verb: " + listed(apiVerbs) + ".",
		}, []string{"verb"}),
		reclaims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "evictd_reclaim_total",
			Help: "Node-level reclaim actions, by kind: " + listed(reclaimKinds) + "; and result: " + listed(reclaimResults) + ".",
		}, []string{"kind", "result"}),
		reclaimed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "evictd_reclaimed_bytes_total",
			Help: "Bytes that node-level reclaim freed on the filesystem, measured with statfs before and after, by kind: " + listed(reclaimKinds) + ".",
		}, []string{"kind"}),
		passDur: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "evictd_pass_duration_seconds",
			Help:    "Duration of one pass of the loop: observe, decide, act.",
			Buckets: passBuckets,
		}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "evictd_passes_total",
			Help: "Passes of the loop, by what started them: " + listed(triggers) + ".",
		}, []string{"trigger"}),
		wakeups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "evictd_wakeups_total",
			Help: "Wake-ups of the loop by source: " + listed(wakeupSources) + ". Wake-ups arriving while a pass is pending share one pass.",
		}, []string{"source"}),
		statsAge: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "evictd_stats_age_seconds",
			Help:    "Time between the observation an eviction decision was based on and the decision.",
			Buckets: statsAgeBuckets,
		}, []string{"signal"}),
		detection: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "evictd_detection_latency_seconds",
			Help:    "Time from a threshold first being observed met to the eviction decision it led to.",
			Buckets: detectionBuckets,
		}, []string{"signal"}),
		issue: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "evictd_eviction_issue_latency_seconds",
			Help:    "Time from an eviction decision to the eviction being issued (the Eviction API accepted it, or a hard eviction's delete returned).",
			Buckets: issueBuckets,
		}, []string{"signal"}),
		owed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "evictd_evictions_owed",
			Help: "Hard evictions whose pods' containers were stopped through the container runtime while the API server did not answer, and that are still to be completed through the API server.",
		}),
		buildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "evictd_build_info",
			Help: "Always 1; the labels say which evictd build is running: its version, the VCS revision it was built from, and the Go version.",
		}, []string{"version", "revision", "goversion"}),
		withheld: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "evictd_evictions_withheld_total",
			Help: "Evictions decided but not issued because of a safety limit, by reason: " + listed(withheldReasons) + ".",
		}, []string{"reason"}),
		capHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "evictd_eviction_cap_reached_total",
			Help: "Times --max-evictions-per-hour was reached: counted once each time the cap withholds an eviction after having had room.",
		}),
		lastHour: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "evictd_evictions_in_last_hour",
			Help: "Evictions issued (evicted or stopped locally) in the sliding hour before the last pass, the count --max-evictions-per-hour caps.",
		}),
		byUnit:    newUnitGauges(),
		refused:   newRefused(),
		expiry:    newExpiryCollector(),
		renewals:  newRenewals(),
		walksCut:  newWalksCut(),
		records:   newFlightRecords(),
		signalled: newSignalLatency(),
		diskStale: newDiskStale(),
		shadow:    newMemoryShadow(),
		// exhaustion.go
		exhaustion: newExhaustion(),
		oomKills:   newOOMKills(),
	}
	m.reviews, m.reviewDur = newReviews()
	m.initCounters()
	m.SetBuild(buildinfo.ModuleVersion(), buildinfo.Revision(""))
	if reg != nil {
		m.register(reg)
	}
	return m
}

// Err reports the collectors New could not register, or nil.
func (m *Metrics) Err() error {
	if m == nil {
		return nil
	}
	return m.err
}

// register puts every collector on reg, sharing collectors already there.
func (m *Metrics) register(reg prometheus.Registerer) {
	var errs []error
	m.available = registerOrShare(reg, m.available, &errs)
	m.capacity = registerOrShare(reg, m.capacity, &errs)
	m.stall = registerOrShare(reg, m.stall, &errs)
	m.locality = registerOrShare(reg, m.locality, &errs)
	m.obsAge = registerOrShare(reg, m.obsAge, &errs)
	m.sigErrors = registerOrShare(reg, m.sigErrors, &errs)
	m.threshold = registerOrShare(reg, m.threshold, &errs)
	m.thrMet = registerOrShare(reg, m.thrMet, &errs)
	m.pressure = registerOrShare(reg, m.pressure, &errs)
	m.decisions = registerOrShare(reg, m.decisions, &errs)
	m.evictions = registerOrShare(reg, m.evictions, &errs)
	m.notIssued = registerOrShare(reg, m.notIssued, &errs)
	m.apiErrors = registerOrShare(reg, m.apiErrors, &errs)
	m.rtErrors = registerOrShare(reg, m.rtErrors, &errs)
	m.reclaims = registerOrShare(reg, m.reclaims, &errs)
	m.reclaimed = registerOrShare(reg, m.reclaimed, &errs)
	m.passDur = registerOrShare(reg, m.passDur, &errs)
	m.passes = registerOrShare(reg, m.passes, &errs)
	m.wakeups = registerOrShare(reg, m.wakeups, &errs)
	m.statsAge = registerOrShare(reg, m.statsAge, &errs)
	m.detection = registerOrShare(reg, m.detection, &errs)
	m.issue = registerOrShare(reg, m.issue, &errs)
	m.owed = registerOrShare(reg, m.owed, &errs)
	m.buildInfo = registerOrShare(reg, m.buildInfo, &errs)
	m.withheld = registerOrShare(reg, m.withheld, &errs)
	m.capHits = registerOrShare(reg, m.capHits, &errs)
	m.lastHour = registerOrShare(reg, m.lastHour, &errs)
	m.registerUnits(reg, &errs)
	m.refused = registerOrShare(reg, m.refused, &errs)
	m.expiry = registerOrShare(reg, m.expiry, &errs)
	m.reviews = registerOrShare(reg, m.reviews, &errs)
	m.reviewDur = registerOrShare(reg, m.reviewDur, &errs)
	m.renewals = registerOrShare(reg, m.renewals, &errs)
	m.walksCut = registerOrShare(reg, m.walksCut, &errs)
	m.records = registerOrShare(reg, m.records, &errs)
	m.signalled = registerOrShare(reg, m.signalled, &errs)
	m.diskStale = registerOrShare(reg, m.diskStale, &errs)
	m.shadow.available = registerOrShare(reg, m.shadow.available, &errs)
	m.shadow.capacity = registerOrShare(reg, m.shadow.capacity, &errs)
	m.shadow.met = registerOrShare(reg, m.shadow.met, &errs)
	m.registerExhaustion(reg, &errs)
	m.oomKills = registerOrShare(reg, m.oomKills, &errs)
	m.err = errors.Join(errs...)
}

// registerOrShare registers c, or returns the identical collector already
// registered; any other failure is appended to errs and c is kept, working
// but unexported.
func registerOrShare[C prometheus.Collector](reg prometheus.Registerer, c C, errs *[]error) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	*errs = append(*errs, fmt.Errorf("register evictd metrics: %w", err))
	return c
}

// initCounters creates at 0 the counter series that deploy/monitoring's
// alerts need before their first event, and no other: an alert on
// increase() misses the event that creates its series. EvictdNoPasses sums
// evictd_passes_total, which must exist while no pass ends;
// EvictdHourlyCapReached fires on the first eviction the cap withholds.
// InitEvictions does the same for the evictions of the signals in force,
// InitDecisions for the series of the dashboard's panels on a threshold's
// decisions.
// Every other series appears with its first event: a node exports what
// happened on it, not the product of every label's values.
func (m *Metrics) initCounters() {
	m.passes.WithLabelValues(string(TriggerTick))
	m.withheld.WithLabelValues(string(WithheldHourlyCap))
}

// InitEvictions creates at 0, for a signal in force, the series of
// evictd_evictions_total and evictd_evictions_not_issued_total that
// EvictdEvicting and EvictdEvictionsFailing fire on at their first event:
// in dry-run, the dry runs; else the evictions issued and the failures.
func (m *Metrics) InitEvictions(sig signals.Signal, dryRun bool) {
	if m == nil {
		return
	}
	s := string(sig)
	if dryRun {
		m.notIssued.WithLabelValues(s, string(NotIssuedDryRun))
		return
	}
	for _, r := range results {
		if r.only == nil || r.only(sig) {
			m.evictions.WithLabelValues(s, s, string(r.v))
		}
	}
	m.notIssued.WithLabelValues(s, string(NotIssuedFailed))
}

// InitDecisions creates at 0, for a threshold's signal, its decisions by
// outcome (in dry-run the dry runs, else the evictions), which the
// per-node dashboard takes increase() of: created at their first event,
// they showed nothing of a node's first eviction (TestPrometheusNode's
// dashboards check). The latency histograms stay created at their first
// observation: at 0 they would be some 300 series per node (their
// buckets, for every signal), for panels that then show from the second
// eviction on.
func (m *Metrics) InitDecisions(sig signals.Signal, dryRun bool) {
	if m == nil {
		return
	}
	s := string(sig)
	for _, o := range outcomes {
		if o.only != nil && !o.only(sig) || dryRun && o.v == decide.OutcomeEvict || !dryRun && o.v == OutcomeDryRun {
			continue
		}
		m.decisions.WithLabelValues(s, string(o.v))
	}
}

// SetBuild sets evictd_build_info's version and revision (the VCS commit),
// replacing those New found: a release build's are set at link time
// (-ldflags -X) rather than stamped by the Go toolchain. An empty one is
// exported as unknown.
func (m *Metrics) SetBuild(version, revision string) {
	if m == nil {
		return
	}
	if version == "" {
		version = buildinfo.Unknown
	}
	if revision == "" {
		revision = buildinfo.Unknown
	}
	m.buildInfo.Reset()
	m.buildInfo.WithLabelValues(version, revision, runtime.Version()).Set(1)
}

// SetObservation exports the last reading of sig. A stall signal's
// reading goes to evictd_memory_pressure_stall_ratio instead, since it is
// not an amount available.
func (m *Metrics) SetObservation(sig signals.Signal, available, capacity int64) {
	if m == nil {
		return
	}
	if m.setStall(sig, available, capacity) {
		return
	}
	m.available.WithLabelValues(string(sig)).Set(float64(available))
	m.capacity.WithLabelValues(string(sig)).Set(float64(capacity))
	m.setUnitObservation(sig, available, capacity)
}

// ForgetObservation deletes every series that came from sig's last reading
// (available, capacity, observation age, thresholds and whether they are
// met), for a signal that could not be read this pass: an old value must not
// look current. Counters and histograms keep their history.
func (m *Metrics) ForgetObservation(sig signals.Signal) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"signal": string(sig)}
	m.available.Delete(l)
	m.capacity.Delete(l)
	m.obsAge.Delete(l)
	m.forgetStall(sig)
	m.forgetUnit(sig)
	m.threshold.DeletePartialMatch(l)
	m.thrMet.DeletePartialMatch(l)
}

// SetObservationAge exports how old sig's observation was when a pass used
// it. A negative age (the clock stepped back after the observation) is
// exported as 0.
func (m *Metrics) SetObservationAge(sig signals.Signal, seconds float64) {
	if m == nil {
		return
	}
	m.obsAge.WithLabelValues(string(sig)).Set(max(seconds, 0))
}

// IncSignalError counts a pass in which sig could not be read.
func (m *Metrics) IncSignalError(sig signals.Signal) {
	if m == nil {
		return
	}
	m.sigErrors.WithLabelValues(string(sig)).Inc()
}

// SetThreshold exports a threshold of sig as an absolute quantity in sig's
// unit (for a stall signal, value is in 1/signals.StallScale and is
// exported as a ratio), and whether it is met.
func (m *Metrics) SetThreshold(sig signals.Signal, kind ThresholdKind, value int64, met bool) {
	if m == nil {
		return
	}
	m.threshold.WithLabelValues(string(sig), string(kind)).Set(thresholdValue(sig, value))
	m.byUnit[unitOf(sig)].threshold.WithLabelValues(string(sig), string(kind)).Set(thresholdValue(sig, value))
	m.thrMet.WithLabelValues(string(sig), string(kind)).Set(boolToFloat(met))
}

// SetPressure exports whether the node is under pressure p.
func (m *Metrics) SetPressure(p signals.Pressure, active bool) {
	if m == nil {
		return
	}
	m.pressure.WithLabelValues(string(p)).Set(boolToFloat(active))
}

// IncEviction counts an eviction issued for sig, as result says.
func (m *Metrics) IncEviction(sig signals.Signal, result Result) {
	if m == nil {
		return
	}
	m.evictions.WithLabelValues(string(sig), string(sig), string(result)).Inc()
}

// IncNotIssued counts an eviction for sig attempted but not issued, for
// reason.
func (m *Metrics) IncNotIssued(sig signals.Signal, reason NotIssued) {
	if m == nil {
		return
	}
	m.notIssued.WithLabelValues(string(sig), string(reason)).Inc()
}

// SetOwed sets how many evictions are owed to the API server.
func (m *Metrics) SetOwed(n int) {
	if m == nil {
		return
	}
	m.owed.Set(float64(n))
}

// IncAPIError counts a failed request to the API server.
func (m *Metrics) IncAPIError(verb APIVerb) {
	if m == nil {
		return
	}
	m.apiErrors.WithLabelValues(string(verb)).Inc()
}

// IncRuntimeError counts a failed operation on the container runtime.
func (m *Metrics) IncRuntimeError(operation RuntimeOperation) {
	if m == nil {
		return
	}
	m.rtErrors.WithLabelValues(string(operation)).Inc()
}

// IncWakeup counts a wake-up of the loop from a source of that kind.
func (m *Metrics) IncWakeup(source WakeupSource) {
	if m == nil {
		return
	}
	m.wakeups.WithLabelValues(string(source)).Inc()
}

// ObserveIssueLatency records the time from the decision to evict for sig
// to the eviction being issued.
func (m *Metrics) ObserveIssueLatency(sig signals.Signal, d time.Duration) {
	if m == nil {
		return
	}
	m.issue.WithLabelValues(string(sig)).Observe(seconds(d))
}

// IncWithheld counts an eviction withheld by a safety limit or an
// eviction in flight.
func (m *Metrics) IncWithheld(reason WithheldReason) {
	if m == nil {
		return
	}
	m.withheld.WithLabelValues(string(reason)).Inc()
}

// IncCapReached counts one reach of --max-evictions-per-hour.
func (m *Metrics) IncCapReached() {
	if m == nil {
		return
	}
	m.capHits.Inc()
}

// seconds converts d for a histogram. A negative duration (a clock stepped
// back between two readings) counts as 0 rather than lowering the sum.
func seconds(d time.Duration) float64 {
	if d < 0 {
		return 0
	}
	return d.Seconds()
}

func boolToFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

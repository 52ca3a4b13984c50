package metrics

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/signals"
)

// TestCountersStartAtZero checks that the counter series the shipped
// alerts need before their first event exist, at 0, from New, and no
// other: a series zero forever is not exported (InitEvictions, called by
// the loop for the signals in force, is TestInitEvictions').
func TestCountersStartAtZero(t *testing.T) {
	m := New(prometheus.NewRegistry())
	tests := []struct {
		name string
		c    prometheus.Collector
		want int
	}{
		{"evictd_signal_errors_total", m.sigErrors, 0},
		{"evictd_decisions_total", m.decisions, 0},
		{"evictd_evictions_total", m.evictions, 0},
		{"evictd_evictions_not_issued_total", m.notIssued, 0},
		{"evictd_api_errors_total", m.apiErrors, 0},
		{"evictd_api_requests_refused_total", m.refused, 0},
		{"evictd_runtime_errors_total", m.rtErrors, 0},
		{"evictd_reclaim_total", m.reclaims, 0},
		{"evictd_reclaimed_bytes_total", m.reclaimed, 0},
		// EvictdNoPasses sums it: it must exist while no pass ends.
		{"evictd_passes_total", m.passes, 1},
		{"evictd_wakeups_total", m.wakeups, 0},
		// EvictdHourlyCapReached fires on the first one withheld.
		{"evictd_evictions_withheld_total", m.withheld, 1},
		{"evictd_eviction_cap_reached_total", m.capHits, 1}, // one series, no labels
		{"evictd_token_renewals_total", m.renewals, 0},
		{"evictd_pod_disk_walks_cut_total", m.walksCut, 0},
		{"evictd_flight_records_total", m.records, 0},
		{"evictd_scrape_reviews_total", m.reviews, 0},
		// A series for each formula not in force, from the first pass
		// that computes it: which exist is the node's (swap on or not)
		// and the configuration's (the formula in force).
		{"evictd_memory_shadow_threshold_met_passes_total", m.shadow.met, 0},
		// A series for each scope the node can count, from the first
		// reading of its count: which exist is the node's (no kubepods
		// scope on cgroup v1).
		{"evictd_oom_kills_total", m.oomKills, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := testutil.CollectAndCount(tt.c, tt.name); got != tt.want {
				t.Errorf("got %d series, want %d", got, tt.want)
			}
			if got := sumOf(t, tt.c); got != 0 {
				t.Errorf("got sum %v, want 0", got)
			}
		})
	}
}

// allNames is every metric family evictd exports.
var allNames = []string{
	"evictd_api_errors_total",
	"evictd_api_requests_refused_total",
	"evictd_build_info",
	"evictd_credential_expiry_timestamp_seconds",
	"evictd_decisions_total",
	"evictd_detection_latency_seconds",
	"evictd_eviction_cap_reached_total",
	"evictd_eviction_issue_latency_seconds",
	"evictd_eviction_release_estimate_seconds",
	"evictd_eviction_release_seconds",
	"evictd_evictions_in_last_hour",
	"evictd_evictions_not_issued_total",
	"evictd_evictions_owed",
	"evictd_evictions_total",
	"evictd_evictions_withheld_total",
	"evictd_flight_records_total",
	"evictd_memory_pressure_stall_local",
	"evictd_memory_pressure_stall_ratio",
	"evictd_memory_shadow_available_bytes",
	"evictd_memory_shadow_capacity_bytes",
	"evictd_memory_shadow_threshold_met_passes_total",
	"evictd_node_pressure",
	"evictd_oom_kills_total",
	"evictd_pass_duration_seconds",
	"evictd_passes_total",
	"evictd_pod_disk_stats_stale_pods",
	"evictd_pod_disk_walks_cut_total",
	"evictd_predicted_evictions_total",
	"evictd_pressure_relief_seconds",
	"evictd_reclaim_total",
	"evictd_reclaimed_bytes_total",
	"evictd_runtime_errors_total",
	"evictd_scrape_review_duration_seconds",
	"evictd_scrape_reviews_total",
	"evictd_signal_available",
	"evictd_signal_available_bytes",
	"evictd_signal_available_inodes",
	"evictd_signal_available_pids",
	"evictd_signal_capacity",
	"evictd_signal_capacity_bytes",
	"evictd_signal_capacity_inodes",
	"evictd_signal_capacity_pids",
	"evictd_signal_errors_total",
	"evictd_signal_observation_age_seconds",
	"evictd_stats_age_seconds",
	"evictd_threshold",
	"evictd_threshold_bytes",
	"evictd_threshold_inodes",
	"evictd_threshold_met",
	"evictd_threshold_pids",
	"evictd_threshold_ratio",
	"evictd_token_renewals_total",
	"evictd_wakeups_total",
}

// exerciseAll gives every family at least one series.
func exerciseAll(m *Metrics) {
	m.SetObservation(signals.MemoryAvailable, 1, 2)
	m.SetObservation(signals.NodeFsInodesFree, 1, 2)
	m.SetObservation(signals.PIDAvailable, 1, 2)
	m.SetObservation(signals.MemoryPressureFullAvg10, 1, signals.StallScale)
	m.SetStallLocal(signals.MemoryPressureFullAvg10, true)
	m.SetThreshold(signals.NodeFsInodesFree, KindSoft, 1, false)
	m.SetThreshold(signals.PIDAvailable, KindHard, 1, false)
	m.SetThreshold(signals.MemoryPressureFullAvg10, KindHard, 1, false)
	m.SetObservationAge(signals.MemoryAvailable, 1)
	m.IncSignalError(signals.MemoryAvailable)
	m.SetThreshold(signals.MemoryAvailable, KindHard, 1, true)
	m.SetPressure(signals.MemoryPressure, true)
	m.ObserveDecision(Decision{Signal: signals.MemoryAvailable, Outcome: decide.OutcomeEvict, At: t0, Observed: t0, FirstMet: t0})
	m.IncEviction(signals.MemoryAvailable, ResultEvicted)
	m.IncNotIssued(signals.MemoryAvailable, NotIssuedFailed)
	m.SetOwed(1)
	m.ObservePass(Pass{Trigger: TriggerTick, Duration: time.Millisecond, EvictionsInLastHour: 3})
	m.IncWakeup(WakeupMemcg)
	m.ObserveIssueLatency(signals.MemoryAvailable, time.Millisecond)
	m.IncWithheld(WithheldHourlyCap)
	m.IncCapReached()
	m.IncRuntimeError(RuntimeStopContainers)
	m.IncDiskWalkCut(WalkCutTime)
	m.SetDiskStatsStale(1)
	m.IncAPIError(APIPodEvict)
	m.ObserveReclaim(decide.ReclaimAction{Kind: decide.ReclaimImages, FreedBytes: 1})
	m.CountTokenRenewal(nil)
	m.SetCredentialExpiries(func() map[Credential]time.Time { return map[Credential]time.Time{CredentialToken: t0} })
	m.ObserveReview(ReviewToken, ReviewAuthenticated, time.Millisecond)
	m.SetMemoryShadow(signals.FormulaMemAvailable, 1, 2)
	m.CountMemoryShadowPass(signals.FormulaMemAvailable, true)
	m.ObserveRelease(signals.MemoryAvailable, time.Millisecond)
	m.ObserveRelief(signals.MemoryAvailable, KindHard, time.Second)
	m.SetReleaseEstimate(time.Second)
	m.IncPredicted(signals.MemoryAvailable)
	m.AddOOMKills(signals.OOMScopeNode, 1)
	m.CountFlightRecord(RecordWritten)
	if rt := m.CountRefusals(refusing{}); rt != nil {
		_, _ = rt.RoundTrip(&http.Request{})
	}
}

// refusing answers every request 401.
type refusing struct{}

func (refusing) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusUnauthorized, Body: http.NoBody}, nil
}

// TestLint runs every family through promtool's naming rules.
func TestLint(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg)
	if err := m.Err(); err != nil {
		t.Fatalf("New: %v", err)
	}
	exerciseAll(m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var got []string
	for _, mf := range mfs {
		got = append(got, mf.GetName())
	}
	if !slices.Equal(got, allNames) {
		t.Fatalf("got families %v, want %v", got, allNames)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatalf("lint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestLintCatchesBadNames makes sure the lint above is able to fail.
func TestLintCatchesBadNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "evictd_pass_duration_ms", Help: "x"})
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatalf("lint: %v", err)
	}
	if len(problems) == 0 {
		t.Error("got no problems for evictd_pass_duration_ms, want some")
	}
}

func TestNewTwiceSharesCollectors(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := New(reg), New(reg)
	if err := errorsOf(a, b); err != "" {
		t.Fatalf("New twice on one registry: %s", err)
	}
	a.ObservePass(Pass{Trigger: TriggerTick})
	b.ObservePass(Pass{Trigger: TriggerTick})
	if got := testutil.ToFloat64(a.passes.WithLabelValues(string(TriggerTick))); got != 2 {
		t.Errorf("got %v tick passes, want 2", got)
	}
}

func TestNewReportsConflicts(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "evictd_threshold", Help: "someone else's"}))
	m := New(reg)
	if m.Err() == nil || !strings.Contains(m.Err().Error(), "evictd_threshold") {
		t.Fatalf("got Err() = %v, want a conflict naming evictd_threshold", m.Err())
	}
	// The other metrics are still registered and working.
	m.SetPressure(signals.PIDPressure, true)
	if got, err := testutil.GatherAndCount(reg, "evictd_node_pressure"); err != nil || got != 1 {
		t.Errorf("got %d evictd_node_pressure series (err %v), want 1", got, err)
	}
}

func TestNilIsNoOp(t *testing.T) {
	var m *Metrics
	exerciseAll(m)
	m.ForgetObservation(signals.MemoryAvailable)
	m.SetBuild("v1", "abc")
	m.InitEvictions(signals.MemoryAvailable, false)
	if err := m.Err(); err != nil {
		t.Errorf("got %v, want nil", err)
	}
	// And a nil registry gives working, unregistered metrics.
	m = New(nil)
	exerciseAll(m)
	if got := testutil.ToFloat64(m.passes.WithLabelValues(string(TriggerTick))); got != 1 {
		t.Errorf("got %v tick passes, want 1", got)
	}
}

func errorsOf(ms ...*Metrics) string {
	var s []string
	for _, m := range ms {
		if err := m.Err(); err != nil {
			s = append(s, err.Error())
		}
	}
	return strings.Join(s, "; ")
}

// sumOf adds up the values of every counter or gauge series c collects.
func sumOf(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	var total float64
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Errorf("write %s: %v", m.Desc(), err)
			continue
		}
		total += pb.GetCounter().GetValue() + pb.GetGauge().GetValue()
	}
	return total
}

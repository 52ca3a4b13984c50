package metrics

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/testing/testagent"
	"github.com/evictd/evictd/signals"
)

// TestVocabulary drives a real registry through the code paths that emit
// (every signal read, its thresholds of both kinds, its decisions and
// issued evictions; every pressure, trigger, review and credential) and
// holds every series it then serves to docs/METRICS.md's table: its family
// has a row, its labels are the row's, and each value is named in the row
// (a signal, in the table). The other way, every family of the table
// served by a real agent, is TestAgentMetricsDocumented (e2e/host).
func TestVocabulary(t *testing.T) {
	doc, err := testagent.LoadMetricsDoc(filepath.Join("..", "..", "docs", "METRICS.md"))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := New(reg)
	at := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	m.SetBuild("v0.0.0-test", "0123abc")
	for _, sig := range evictionSignals() {
		for _, r := range resultValues() {
			m.IncEviction(sig, r)
		}
		for _, r := range notIssuedValues() {
			m.IncNotIssued(sig, r)
		}
	}
	for _, sig := range signals.All() {
		m.SetObservation(sig, 1, 2)
		m.SetObservationAge(sig, 1)
		m.IncSignalError(sig)
		m.SetStallLocal(sig, true)
		for _, kind := range []ThresholdKind{KindHard, KindSoft} {
			m.SetThreshold(sig, kind, 1, true)
		}
		m.ObserveDecision(Decision{Signal: sig, Outcome: decide.OutcomeEvict, At: at, Observed: at.Add(-time.Second), FirstMet: at.Add(-time.Second)})
		m.ObserveIssueLatency(sig, time.Second)
		for _, p := range valuesOf(signalPaths) {
			m.ObserveSignalLatency(sig, p, time.Millisecond)
		}
		m.ObserveRelease(sig, time.Second)
		m.IncPredicted(sig)
		for _, kind := range []ThresholdKind{KindHard, KindSoft} {
			m.ObserveRelief(sig, kind, time.Second)
		}
	}
	m.SetReleaseEstimate(time.Second)
	for _, p := range signals.Pressures() {
		m.SetPressure(p, true)
	}
	for _, tr := range triggerValues() {
		m.ObservePass(Pass{Trigger: tr, Duration: time.Millisecond, EvictionsInLastHour: 1})
	}
	for _, r := range valuesOf(reviews) {
		for _, res := range valuesOf(reviewResults) {
			m.ObserveReview(r, res, time.Millisecond)
		}
	}
	m.SetCredentialExpiries(func() map[Credential]time.Time {
		out := map[Credential]time.Time{}
		for _, c := range valuesOf(credentials) {
			out[c] = at
		}
		return out
	})
	m.SetOwed(1)
	m.SetDiskStatsStale(1)
	for _, f := range signals.MemoryFormulas() {
		m.SetMemoryShadow(f, 1, 2)
		m.CountMemoryShadowPass(f, true)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var series []testagent.Series
	for _, mf := range mfs {
		for _, metric := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range metric.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			series = append(series, testagent.Series{Family: mf.GetName(), Labels: labels})
		}
	}
	if len(series) < 100 {
		t.Fatalf("the registry served %d series; want the vocabulary's", len(series))
	}
	for _, u := range doc.Undocumented(series) {
		t.Error(u)
	}
}

// TestVocabularyHelp checks each label's list of values against HELP and
// what New creates: HELP names every value, and no series New creates at
// startup (InitEvictions included) carries a value the list lacks.
func TestVocabularyHelp(t *testing.T) {
	tests := []struct {
		family, label string
		values        []string
		vec           func(m *Metrics) *prometheus.CounterVec
	}{
		{"evictd_decisions_total", "outcome", asStrings(valuesOf(outcomes)), func(m *Metrics) *prometheus.CounterVec { return m.decisions }},
		{"evictd_evictions_total", "result", asStrings(resultValues()), func(m *Metrics) *prometheus.CounterVec { return m.evictions }},
		{"evictd_evictions_not_issued_total", "reason", asStrings(notIssuedValues()), func(m *Metrics) *prometheus.CounterVec { return m.notIssued }},
		{"evictd_evictions_withheld_total", "reason", asStrings(withheldReasonValues()), func(m *Metrics) *prometheus.CounterVec { return m.withheld }},
		{"evictd_passes_total", "trigger", asStrings(triggerValues()), func(m *Metrics) *prometheus.CounterVec { return m.passes }},
		{"evictd_wakeups_total", "source", asStrings(wakeupSourceValues()), func(m *Metrics) *prometheus.CounterVec { return m.wakeups }},
		{"evictd_api_errors_total", "verb", asStrings(apiVerbValues()), func(m *Metrics) *prometheus.CounterVec { return m.apiErrors }},
		{"evictd_api_requests_refused_total", "code", valuesOf(refusedCodes), func(m *Metrics) *prometheus.CounterVec { return m.refused }},
		{"evictd_token_renewals_total", "result", asStrings(valuesOf(tokenRenewals)), func(m *Metrics) *prometheus.CounterVec { return m.renewals }},
		{"evictd_runtime_errors_total", "operation", asStrings(runtimeOperationValues()), func(m *Metrics) *prometheus.CounterVec { return m.rtErrors }},
		{"evictd_reclaim_total", "kind", asStrings(valuesOf(reclaimKinds)), func(m *Metrics) *prometheus.CounterVec { return m.reclaims }},
		{"evictd_reclaim_total", "result", asStrings(reclaimResultValues()), func(m *Metrics) *prometheus.CounterVec { return m.reclaims }},
		{"evictd_reclaimed_bytes_total", "kind", asStrings(valuesOf(reclaimKinds)), func(m *Metrics) *prometheus.CounterVec { return m.reclaimed }},
		{"evictd_pod_disk_walks_cut_total", "reason", asStrings(walkCutValues()), func(m *Metrics) *prometheus.CounterVec { return m.walksCut }},
	}
	reg := prometheus.NewRegistry()
	started := New(reg)
	for _, sig := range evictionSignals() {
		started.InitEvictions(sig, false)
		started.InitEvictions(sig, true)
	}
	atStart, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.family+"/"+tt.label, func(t *testing.T) {
			ch := make(chan *prometheus.Desc, 1)
			tt.vec(started).Describe(ch)
			desc := (<-ch).String()
			if !strings.Contains(desc, `fqName: "`+tt.family+`"`) {
				t.Fatalf("the table's vector is not %s: %s", tt.family, desc)
			}
			help := descHelpRE.FindStringSubmatch(desc)[1]
			for _, v := range tt.values {
				if !mentions(help, v) {
					t.Errorf("%s=%q: HELP does not name it: %q", tt.label, v, help)
				}
			}
			i := slices.IndexFunc(atStart, func(mf *dto.MetricFamily) bool { return mf.GetName() == tt.family })
			if i < 0 {
				return // no series at startup
			}
			for _, m := range atStart[i].GetMetric() {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == tt.label && !slices.Contains(tt.values, lp.GetValue()) {
						t.Errorf("%s=%q at startup: a value not in the list %v", tt.label, lp.GetValue(), tt.values)
					}
				}
			}
		})
	}
}

// descHelpRE reads a Desc's HELP.
var descHelpRE = regexp.MustCompile(`help: "((?:[^"\\]|\\.)*)"`)

// TestInitEvictions checks the series InitEvictions creates for the
// alerts: in dry-run the dry runs alone; else the evictions issued (no
// local stop for a local-storage pseudo-signal) and the failures.
func TestInitEvictions(t *testing.T) {
	local := decide.LocalStorageSignals()[0]
	for _, tc := range []struct {
		sig       signals.Signal
		dryRun    bool
		issued    []Result
		notIssued []NotIssued
	}{
		{signals.MemoryAvailable, false, []Result{ResultEvicted, ResultStoppedLocally}, []NotIssued{NotIssuedFailed}},
		{signals.MemoryAvailable, true, nil, []NotIssued{NotIssuedDryRun}},
		{local, false, []Result{ResultEvicted}, []NotIssued{NotIssuedFailed}},
		{local, true, nil, []NotIssued{NotIssuedDryRun}},
	} {
		t.Run(fmt.Sprintf("%s dry-run %v", tc.sig, tc.dryRun), func(t *testing.T) {
			m := New(prometheus.NewRegistry())
			m.InitEvictions(tc.sig, tc.dryRun)
			if got := testutil.CollectAndCount(m.evictions); got != len(tc.issued) {
				t.Errorf("evictd_evictions_total: got %d series, want %d", got, len(tc.issued))
			}
			for _, r := range tc.issued {
				if countOf(t, m.evictions, string(tc.sig), string(tc.sig), string(r)) != 1 {
					t.Errorf("no evictd_evictions_total{eviction_signal=%q,result=%q}", tc.sig, r)
				}
			}
			if got := testutil.CollectAndCount(m.notIssued); got != len(tc.notIssued) {
				t.Errorf("evictd_evictions_not_issued_total: got %d series, want %d", got, len(tc.notIssued))
			}
			for _, r := range tc.notIssued {
				if countOf(t, m.notIssued, string(tc.sig), string(r)) != 1 {
					t.Errorf("no evictd_evictions_not_issued_total{eviction_signal=%q,reason=%q}", tc.sig, r)
				}
			}
			if sumOf(t, m.evictions)+sumOf(t, m.notIssued) != 0 {
				t.Error("a series created above 0")
			}
		})
	}
}

// countOf counts the series of c with exactly these label values, without
// creating any.
func countOf(t *testing.T, c prometheus.Collector, values ...string) int {
	t.Helper()
	ch := make(chan prometheus.Metric)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	n := 0
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatalf("write: %v", err)
		}
		var got []string
		for _, lp := range pb.GetLabel() {
			got = append(got, lp.GetValue())
		}
		if slices.Equal(sortedCopy(got), sortedCopy(values)) {
			n++
		}
	}
	return n
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// mentions reports whether help names v as a word of its own: not as a
// part of a longer value (evict in none-evictable or evicted).
func mentions(help, v string) bool {
	return regexp.MustCompile(`(^|[\s:,(])` + regexp.QuoteMeta(v) + `($|[\s,.;:)])`).MatchString(help)
}

func asStrings[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

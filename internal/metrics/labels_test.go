package metrics

import (
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	m.SetVersion("v0.0.0-test")
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

// TestVocabularyHelp checks each label's list of values against what New
// creates and what HELP says: every value has a series from startup, HELP
// names every value, and no series carries a value the list lacks.
func TestVocabularyHelp(t *testing.T) {
	tests := []struct {
		family, label string
		values        []string
	}{
		{"evictd_decisions_total", "outcome", asStrings(valuesOf(outcomes))},
		{"evictd_evictions_total", "result", asStrings(resultValues())},
		{"evictd_evictions_withheld_total", "reason", asStrings(withheldReasonValues())},
		{"evictd_passes_total", "trigger", asStrings(triggerValues())},
		{"evictd_wakeups_total", "source", asStrings(wakeupSourceValues())},
		{"evictd_api_errors_total", "verb", asStrings(apiVerbValues())},
		{"evictd_api_requests_refused_total", "code", valuesOf(refusedCodes)},
		{"evictd_token_renewals_total", "result", asStrings(valuesOf(tokenRenewals))},
		{"evictd_runtime_errors_total", "operation", asStrings(runtimeOperationValues())},
		{"evictd_reclaim_total", "kind", asStrings(valuesOf(reclaimKinds))},
		{"evictd_reclaim_total", "result", asStrings(reclaimResultValues())},
		{"evictd_reclaimed_bytes_total", "kind", asStrings(valuesOf(reclaimKinds))},
		{"evictd_pod_disk_walks_cut_total", "reason", asStrings(walkCutValues())},
	}
	reg := prometheus.NewRegistry()
	New(reg)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.family+"/"+tt.label, func(t *testing.T) {
			i := slices.IndexFunc(mfs, func(mf *dto.MetricFamily) bool { return mf.GetName() == tt.family })
			if i < 0 {
				t.Fatalf("no %s after New", tt.family)
			}
			mf := mfs[i]
			seen := map[string]bool{}
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == tt.label {
						seen[lp.GetValue()] = true
					}
				}
			}
			for _, v := range tt.values {
				if !seen[v] {
					t.Errorf("%s=%q: no series after New", tt.label, v)
				}
				if !mentions(mf.GetHelp(), v) {
					t.Errorf("%s=%q: HELP does not name it: %q", tt.label, v, mf.GetHelp())
				}
			}
			for v := range seen {
				if !slices.Contains(tt.values, v) {
					t.Errorf("%s=%q: a series for a value not in the list %v", tt.label, v, tt.values)
				}
			}
		})
	}
}

// TestVocabularyLocalStorage checks the series of the local-storage
// evictions, whose pseudo-signals are not thresholds' signals.
func TestVocabularyLocalStorage(t *testing.T) {
	m := New(prometheus.NewRegistry())
	for _, sig := range decide.LocalStorageSignals() {
		for _, r := range resultValues() {
			want := r != ResultPDBBlocked && r != ResultStoppedLocally
			if got := countOf(t, m.evictions, string(sig), string(r)) == 1; got != want {
				t.Errorf("evictd_evictions_total{signal=%q,result=%q} after New: got %v, want %v", sig, r, got, want)
			}
		}
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

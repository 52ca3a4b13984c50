package node

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/testing/testnode"
)

// dashboardsDir holds the Grafana dashboards operators import.
const dashboardsDir = "../../deploy/monitoring/dashboards"

// notCaused are the dashboard queries TestPrometheusNode's episode gives
// no data, by a part of their expression, with why: each is still
// evaluated and must be valid, and an entry that explains no query
// without data fails the test as out of date.
var notCaused = map[string]string{
	"kube_node_info":                    "kube-state-metrics' series: the test runs no kube-state-metrics",
	"evictd_evictions_not_issued_total": "no eviction refused, failed or dry-run in the episode",
	"evictd_evictions_withheld_total":   "no eviction withheld in the episode",
	"evictd_reclaimed_bytes_total":      "no disk reclaim in the episode",
	"evictd_api_errors_total":           "no API error in the episode",
	"evictd_api_requests_refused_total": "no request refused in the episode",
	`code!~"2.."`:                       "no failed API request in the episode",
	"evictd_signal_errors_total":        "no unreadable signal in the episode",
	"evictd_runtime_errors_total":       "no runtime error in the episode",
	`result="failed"`:                   "no failed reclaim in the episode",
	`evictd_threshold_bytes{job="evictd", node=~"$node", signal=~"nodefs`: "the episode sets no filesystem threshold",
	"evictd_eviction_issue_latency_seconds_bucket":                        "a histogram appears with its first observation, and rate() shows it from the second: the episode has one eviction",
	"evictd_detection_latency_seconds_bucket":                             "a histogram appears with its first observation, and rate() shows it from the second: the episode has one decision",
	"evictd_stats_age_seconds_bucket":                                     "a histogram appears with its first observation, and rate() shows it from the second: the episode has one decision",
	"evictd_threshold_inodes":                                             "the episode sets no inodes threshold",
	"evictd_threshold_pids":                                               "the episode sets no PID threshold",
	"evictd_threshold_ratio":                                              "the episode sets no memory stall threshold",
}

// panelTarget is one query of a dashboard's panel.
type panelTarget struct {
	dashboard, panel, expr string
}

// dashboardTargets returns every panel query of the dashboards in dir,
// rows' nested panels included.
func dashboardTargets(t *testing.T, dir string) []panelTarget {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("dashboards in %s: %v (%d files)", dir, err, len(files))
	}
	type panel struct {
		Title   string  `json:"title"`
		Panels  []panel `json:"panels"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	}
	var out []panelTarget
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Panels []panel `json:"panels"`
		}
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var walk func([]panel)
		walk = func(ps []panel) {
			for _, p := range ps {
				for _, tg := range p.Targets {
					if tg.Expr != "" {
						out = append(out, panelTarget{filepath.Base(f), p.Title, tg.Expr})
					}
				}
				walk(p.Panels)
			}
		}
		walk(d.Panels)
	}
	return out
}

// grafanaVars are the dashboards' variables as Grafana sets them for this
// node: the node chosen, every cluster, the selectors' defaults, and the
// intervals of a 1 s scrape.
func grafanaVars(n *testnode.Node) *strings.Replacer {
	return strings.NewReplacer(
		"$__rate_interval", "15s",
		"$__interval", "5s",
		"$evictd_selector", `job="evictd"`,
		"$kube_selector", `job="kube-state-metrics"`,
		"$cluster", ".*",
		"$node", regexp.QuoteMeta(n.Name()),
	)
}

// queryRange returns the non-NaN values of a range query from start to now,
// step 2 s.
func (p *prometheus) queryRange(expr string, start time.Time) ([]float64, error) {
	var data struct {
		Result []struct {
			Values [][2]any `json:"values"`
		} `json:"result"`
	}
	q := url.Values{"query": {expr}, "start": {strconv.FormatInt(start.Unix(), 10)},
		"end": {strconv.FormatInt(time.Now().Unix(), 10)}, "step": {"2"}}
	if err := p.get("/api/v1/query_range", q, &data); err != nil {
		return nil, err
	}
	var out []float64
	for _, r := range data.Result {
		for _, v := range r.Values {
			s, _ := v[1].(string)
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: value %v", expr, v)
			}
			if !math.IsNaN(f) {
				out = append(out, f)
			}
		}
	}
	return out, nil
}

// checkDashboards evaluates every dashboard query, its variables set as
// for n, over the time since start on prom, which has scraped n's evictd
// through a pressure episode: each must be valid and give data unless
// notCaused says why the episode gives it none. That they name only
// metrics evictd defines is TestDashboardNames' (deploy/monitoring).
func checkDashboards(t *testing.T, prom *prometheus, n *testnode.Node, start time.Time) {
	t.Helper()
	vars := grafanaVars(n)
	var withData, without int
	explained := map[string]bool{}
	for _, tg := range dashboardTargets(t, dashboardsDir) {
		expr := vars.Replace(tg.expr)
		where := fmt.Sprintf("%s, panel %q: %s", tg.dashboard, tg.panel, expr)
		v, err := prom.queryRange(expr, start)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		var reasons, parts []string
		for p, why := range notCaused {
			if strings.Contains(tg.expr, p) {
				reasons, parts = append(reasons, why), append(parts, p)
			}
		}
		reason, exempt := strings.Join(reasons, "; "), len(parts) > 0
		switch {
		case len(v) > 0:
			withData++
		case exempt:
			without++
			for _, p := range parts {
				explained[p] = true
			}
			t.Logf("no data, as expected (%s): %s", reason, where)
		default:
			t.Errorf("%s: no data over the episode", where)
		}
	}
	for part, why := range notCaused {
		if !explained[part] {
			t.Errorf("notCaused[%q] (%s) explains no query without data: out of date", part, why)
		}
	}
	t.Logf("dashboards: %d queries gave data, %d none as listed", withData, without)
}

package monitoring

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/internal/metrics"
)

const (
	rulesFile     = "evictd-rules.yaml"
	dashboardFile = "dashboards/evictd.json"
	// fleetDashboardFile is the fleet's overview, beside the per-node one.
	fleetDashboardFile = "dashboards/evictd-fleet.json"
	runbookFile        = "RUNBOOK.md"
)

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Record      string            `json:"record"`
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

func readRules(t *testing.T) ruleFile {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.UnmarshalStrict(b, &rf); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	return rf
}

// exported is every metric family evictd registers, from
// internal/metrics itself, with whether its HELP marks it deprecated.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	rec := &describer{names: map[string]bool{}}
	if err := metrics.New(rec).Err(); err != nil {
		t.Fatalf("metrics.New: %v", err)
	}
	if len(rec.names) < 20 {
		t.Fatalf("got %d metric families from internal/metrics, want them all", len(rec.names))
	}
	return rec.names
}

// describer is a prometheus.Registerer that records the name of every
// family registered on it.
type describer struct{ names map[string]bool }

var descRE = regexp.MustCompile(`fqName: "([^"]+)", help: "((?:[^"\\]|\\.)*)"`)

func (d *describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	for desc := range ch {
		if m := descRE.FindStringSubmatch(desc.String()); m != nil {
			d.names[m[1]] = strings.HasPrefix(m[2], "Deprecated:")
		}
	}
	return nil
}

func (d *describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d *describer) Unregister(prometheus.Collector) bool { return false }

// evictdNames lists the evictd_* metric names a PromQL expression uses,
// a histogram's _bucket, _sum and _count series under the histogram's name.
var identRE = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)

func evictdNames(expr string, known map[string]bool) []string {
	var out []string
	for _, id := range identRE.FindAllString(expr, -1) {
		if !strings.HasPrefix(id, "evictd_") {
			continue
		}
		if _, ok := known[id]; !ok {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, cut := strings.CutSuffix(id, suffix); cut {
					if _, ok := known[base]; ok {
						id = base
					}
				}
			}
		}
		out = append(out, id)
	}
	return out
}

// TestDashboardNames checks every query of the dashboards, their panels'
// and their variables', against the metrics evictd exports: a renamed
// metric fails here, not on a blank panel. The deprecated families are
// not used. The per-node dashboard filters every panel by $node and
// job="evictd"; the fleet dashboard every query by $cluster and the
// selector variables, whose defaults are the rules' job="evictd" and
// kube-state-metrics'.
func TestDashboardNames(t *testing.T) {
	known := exported(t)
	records := map[string]bool{}
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				records[r.Record] = true
			}
		}
	}
	for _, tc := range []struct {
		file     string
		vars     []string
		filter   func(expr string) bool
		minExprs int
	}{
		{dashboardFile, []string{"datasource", "node"}, func(expr string) bool {
			return strings.Contains(expr, `node=~"$node"`) && strings.Contains(expr, `job="evictd"`)
		}, 20},
		{fleetDashboardFile, []string{"datasource", "evictd_selector", "kube_selector", "cluster"}, func(expr string) bool {
			return strings.Contains(expr, `cluster=~"$cluster"`) && (strings.Contains(expr, "$evictd_selector") || strings.Contains(expr, "$kube_selector"))
		}, 10},
	} {
		t.Run(tc.file, func(t *testing.T) {
			d := readDashboard(t, tc.file)
			for _, want := range tc.vars {
				if _, ok := d.vars[want]; !ok {
					t.Errorf("no variable %q", want)
				}
			}
			if len(d.exprs) < tc.minExprs {
				t.Fatalf("got %d queries, want every panel's", len(d.exprs))
			}
			for where, expr := range d.exprs {
				for _, name := range evictdNames(d.expand(expr), known) {
					deprecated, ok := known[name]
					switch {
					case !ok && !records[name]:
						t.Errorf("%s: %s is not a metric evictd exports: %s", where, name, expr)
					case deprecated:
						t.Errorf("%s: %s is deprecated: %s", where, name, expr)
					}
				}
				if strings.HasPrefix(where, "panel ") && !tc.filter(expr) {
					t.Errorf("%s: not filtered by the dashboard's variables: %s", where, expr)
				}
			}
		})
	}
	fleet := readDashboard(t, fleetDashboardFile)
	for name, want := range map[string]string{"evictd_selector": `job="evictd"`, "kube_selector": `job="kube-state-metrics"`} {
		if got := fleet.vars[name]; got != want {
			t.Errorf("%s: variable %s defaults to %q, want %q", fleetDashboardFile, name, got, want)
		}
	}
}

// dashboard is what the tests read of a Grafana dashboard: its
// variables (name → query, a textbox's default) and every PromQL
// expression, keyed by where it is ("panel <title> <refId>", "variable
// <name>").
type dashboard struct {
	vars  map[string]string
	exprs map[string]string
}

// expand puts into expr the values a dashboard's variables take when
// all is selected: the selectors' defaults, .* for a label variable, 5m
// for Grafana's rate interval. A variable query's label_values(...)
// becomes its selector.
func (d dashboard) expand(expr string) string {
	if inner, ok := strings.CutPrefix(expr, "label_values("); ok {
		if i := strings.LastIndex(inner, ","); i > 0 {
			expr = inner[:i]
		}
	}
	r := strings.NewReplacer("$evictd_selector", d.vars["evictd_selector"], "$kube_selector", d.vars["kube_selector"],
		"$node", ".*", "$cluster", ".*", "$__rate_interval", "5m")
	return r.Replace(expr)
}

// readDashboard reads a dashboard and checks that every panel queries
// the datasource variable, in schema 39 or later.
func readDashboard(t *testing.T, file string) dashboard {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	type target struct {
		Expr       string `json:"expr"`
		RefID      string `json:"refId"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	}
	type panel struct {
		Title   string   `json:"title"`
		Type    string   `json:"type"`
		Targets []target `json:"targets"`
		Panels  []panel  `json:"panels"`
	}
	var d struct {
		SchemaVersion int     `json:"schemaVersion"`
		Panels        []panel `json:"panels"`
		Templating    struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if d.SchemaVersion < 39 {
		t.Errorf("%s: schemaVersion %d, want 39 or later", file, d.SchemaVersion)
	}
	out := dashboard{vars: map[string]string{}, exprs: map[string]string{}}
	for _, v := range d.Templating.List {
		var q struct {
			Query string `json:"query"`
		}
		var text string
		switch {
		case json.Unmarshal(v.Query, &q) == nil:
			text = q.Query
		case json.Unmarshal(v.Query, &text) == nil:
		default:
			t.Errorf("%s: variable %s: query %s", file, v.Name, v.Query)
		}
		out.vars[v.Name] = text
		if v.Type == "query" {
			out.exprs["variable "+v.Name] = text
		}
	}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q: no queries", file, p.Title)
			}
			for _, tg := range p.Targets {
				out.exprs["panel "+p.Title+" "+tg.RefID] = tg.Expr
				if tg.Datasource.UID != "${datasource}" {
					t.Errorf("%s: panel %q %s: datasource %q, want ${datasource}", file, p.Title, tg.RefID, tg.Datasource.UID)
				}
			}
		}
	}
	walk(d.Panels)
	return out
}

// TestRuleNames checks the rules' queries the same way: evictd's metrics
// by their current names, and the recording rules before their users.
func TestRuleNames(t *testing.T) {
	known := exported(t)
	records := map[string]bool{}
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			name := r.Record + r.Alert
			for _, m := range evictdNames(r.Expr, known) {
				deprecated, ok := known[m]
				switch {
				case !ok && !records[m]:
					t.Errorf("%s: %s is not a metric evictd exports", name, m)
				case deprecated:
					t.Errorf("%s: %s is deprecated", name, m)
				}
			}
			if r.Record != "" {
				records[r.Record] = true
			}
		}
	}
}

// TestAlertsDocumented checks that every alert has a severity, a summary,
// a description, a runbook_url whose anchor is a section of RUNBOOK.md,
// and a promtool test in tests/alerts.yaml.
func TestAlertsDocumented(t *testing.T) {
	runbook, err := os.ReadFile(runbookFile)
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("tests/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			switch r.Labels["severity"] {
			case "critical", "warning", "info":
			default:
				t.Errorf("%s: severity %q, want critical, warning or info", r.Alert, r.Labels["severity"])
			}
			for _, a := range []string{"summary", "description"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s: no %s", r.Alert, a)
				}
			}
			wantURL := "https://github.com/evictd/evictd/blob/main/deploy/monitoring/RUNBOOK.md#" + strings.ToLower(r.Alert)
			if got := r.Annotations["runbook_url"]; got != wantURL {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, wantURL)
			}
			if !regexp.MustCompile(`(?m)^## ` + r.Alert + `$`).Match(runbook) {
				t.Errorf("%s: no section \"## %s\" in %s", r.Alert, r.Alert, runbookFile)
			}
			if !regexp.MustCompile(`(?m)^\s+alertname: ` + r.Alert + `$`).Match(tests) {
				t.Errorf("%s: no test in tests/alerts.yaml", r.Alert)
			}
		}
	}
	if n < 10 {
		t.Errorf("got %d alerts, want at least 10", n)
	}
}

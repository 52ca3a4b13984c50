package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/internal/testing/childproc"
	"github.com/evictd/evictd/internal/testing/testcluster"
	"github.com/evictd/evictd/internal/testing/testnode"
)

// rulesFile is deploy/monitoring's rule file, as operators load it.
const rulesFile = "../../deploy/monitoring/evictd-rules.yaml"

// evictingWindow is EvictdEvicting's range over the evictions issued in
// rulesFile, and what the test shortens it to so that the alert resolves
// within the test: the rule is otherwise the file's own (its dry-run
// branch, which this evictd does not run, keeps its 10 minutes).
const evictingWindow, evictingWindowTest = `increase(evictd_evictions_total{job="evictd"}[10m])`, `increase(evictd_evictions_total{job="evictd"}[20s])`

// TestPrometheusNode runs a real Prometheus (Debian's prometheus package)
// that scrapes evictd on a real node with deploy/monitoring's rules
// loaded, and checks that a memory pressure episode fires EvictdEvicting
// for the node and that the alert resolves once the episode is over.
func TestPrometheusNode(t *testing.T) {
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("prometheus not found and CI=true: run hack/install-prometheus.sh (as root)")
		}
		t.Skip("prometheus not found (Debian's prometheus package; hack/install-prometheus.sh installs it as root)")
	}
	n := testnode.StartForTest(t, testnode.Options{Name: "e2e-prometheus"})
	startEvictd(t, n,
		"--eviction-hard=memory.available<500Mi",
		"--eviction-pressure-transition-period=5s")
	prom := startPrometheus(t, promBin, n)
	began := time.Now()

	poll(t, "Prometheus to scrape evictd", 60*time.Second, func() (bool, string) {
		v, err := prom.query(t, `up{job="evictd", node="`+n.Name()+`"}`)
		return err == nil && len(v) == 1 && v[0] == 1, fmt.Sprintf("up = %v (err %v)", v, err)
	})
	// evictd's token is a ServiceAccount token from the TokenRequest API:
	// a JWT whose expiry evictd exports.
	if v, err := prom.query(t, `evictd_credential_expiry_timestamp_seconds{credential="token", node="`+n.Name()+`"} - time()`); err != nil || len(v) != 1 || v[0] <= 0 || v[0] > 48*3600 {
		t.Errorf("token expiry less now = %v s (err %v), want one series, in the next 48 h", v, err)
	}
	if a := prom.alerts(t, "EvictdEvicting"); len(a) != 0 {
		t.Fatalf("EvictdEvicting before any pressure: %v", a)
	}

	// The pressure episode: the allocatable scenario's hog, evicted on the
	// hard threshold.
	deleted := watchDeletion(t, n, "default", "hog")
	hog := labelled(n.Pod("hog", "alloc", "--mib", "2300", "--rate", "200"))
	if _, err := n.Admin().CoreV1().Pods("default").Create(t.Context(), hog, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-deleted:
	case <-time.After(60 * time.Second):
		t.Fatal("hog not evicted within 60 s")
	}
	evicted := time.Now()

	var fired alert
	poll(t, "EvictdEvicting to fire", 30*time.Second, func() (bool, string) {
		for _, a := range prom.alerts(t, "EvictdEvicting") {
			if a.State == "firing" && a.Labels["node"] == n.Name() {
				fired = a
				return true, ""
			}
		}
		return false, fmt.Sprintf("alerts: %v", prom.alerts(t, ""))
	})
	t.Logf("EvictdEvicting firing %s after the eviction: %v; %s",
		time.Since(evicted).Round(100*time.Millisecond), fired.Labels, fired.Annotations["description"])
	if r := fired.Labels["result"]; r != "evicted" && r != "stopped-locally" {
		t.Errorf("EvictdEvicting result %q, want evicted or stopped-locally", r)
	}
	if fired.Labels["severity"] != "info" || !strings.HasSuffix(fired.Annotations["runbook_url"], "RUNBOOK.md#evictdevicting") {
		t.Errorf("EvictdEvicting labels %v, annotations %v", fired.Labels, fired.Annotations)
	}
	// The recording rules see it too: their group is evaluated on its own
	// schedule, up to an interval after the alerts' group (and later on a
	// loaded machine), and rate() needs a scrape after the increase.
	poll(t, "instance:evictd_evictions_issued:rate5m above 0", 30*time.Second, func() (bool, string) {
		v, err := prom.query(t, `instance:evictd_evictions_issued:rate5m{node="`+n.Name()+`"}`)
		return err == nil && len(v) == 1 && v[0] > 0, fmt.Sprintf("instance:evictd_evictions_issued:rate5m = %v (err %v), want one series above 0", v, err)
	})

	poll(t, "the hog to go", 30*time.Second, func() (bool, string) { return gone(t, n, "default", "hog") })
	poll(t, "EvictdEvicting to resolve", 90*time.Second, func() (bool, string) {
		a := prom.alerts(t, "EvictdEvicting")
		return len(a) == 0, fmt.Sprintf("still: %v", a)
	})
	t.Logf("EvictdEvicting resolved %s after the eviction", time.Since(evicted).Round(100*time.Millisecond))
	checkDashboards(t, prom, n, began)
	cleanPods(t, n)
}

// prometheus is a running Prometheus server.
type prometheus struct{ base string }

// startPrometheus runs Prometheus with a scrape interval and rule
// evaluation of 1 s, scraping n's evictd as the job and node label
// deploy/monitoring/README.md describe, with rulesFile loaded; it is
// stopped when t ends.
func startPrometheus(t *testing.T, bin string, n *testnode.Node) *prometheus {
	t.Helper()
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rules), evictingWindow) {
		t.Fatalf("%s: EvictdEvicting's %q not found: update the test", rulesFile, evictingWindow)
	}
	dir := t.TempDir()
	rulesPath := filepath.Join(dir, "evictd-rules.yaml")
	if err := os.WriteFile(rulesPath, []byte(strings.Replace(string(rules), evictingWindow, evictingWindowTest, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: evictd
    static_configs:
      - targets: [%q]
        labels: {node: %q}
`, rulesPath, n.MetricsAddr(), n.Name())
	configPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	ports, err := testcluster.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	logPath := filepath.Join(n.Dir(), "prometheus.log")
	p, err := childproc.Start("prometheus", bin, []string{
		"--config.file=" + configPath,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr,
	}, logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of Prometheus' log:\n%s", tail(logPath, 40))
		}
		if err := p.Stop(5 * time.Second); err != nil {
			t.Logf("stop prometheus: %v", err)
		}
	})
	prom := &prometheus{base: "http://" + addr}
	poll(t, "Prometheus to load the rules", 60*time.Second, func() (bool, string) {
		if p.Exited() {
			t.Fatalf("prometheus exited: %v\n%s", p.ExitError(), tail(logPath, 40))
		}
		var rules struct {
			Groups []struct {
				Name string `json:"name"`
			} `json:"groups"`
		}
		if err := prom.get("/api/v1/rules", nil, &rules); err != nil {
			return false, err.Error()
		}
		return len(rules.Groups) == 2, fmt.Sprintf("rule groups %v", rules.Groups)
	})
	return prom
}

// get decodes the data of a Prometheus API answer into v.
func (p *prometheus) get(path string, q url.Values, v any) error {
	resp, err := http.Get(p.base + path + "?" + q.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("%s: %s", path, body.Error)
	}
	return json.Unmarshal(body.Data, v)
}

// query returns the values of an instant query's vector.
func (p *prometheus) query(t *testing.T, expr string) ([]float64, error) {
	t.Helper()
	var data struct {
		Result []struct {
			Value [2]any `json:"value"`
		} `json:"result"`
	}
	if err := p.get("/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	var out []float64
	for _, r := range data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: value %v", expr, r.Value)
		}
		out = append(out, v)
	}
	return out, nil
}

// alert is one of Prometheus' active alerts, pending or firing.
type alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
}

// alerts returns the active alerts named name ("" for every one).
func (p *prometheus) alerts(t *testing.T, name string) []alert {
	t.Helper()
	var data struct {
		Alerts []alert `json:"alerts"`
	}
	if err := p.get("/api/v1/alerts", nil, &data); err != nil {
		t.Fatalf("alerts: %v", err)
	}
	var out []alert
	for _, a := range data.Alerts {
		if name == "" || a.Labels["alertname"] == name {
			out = append(out, a)
		}
	}
	return out
}

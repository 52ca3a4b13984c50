package apiserver

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/testing/testagent"
)

// TestAgentClientMetrics runs the evictd binary with a node-bound token
// against a real kube-apiserver with deploy/ applied, and finds its API
// requests in its own scrape under the kubelet's names: the Lease and the
// pod list and watch in rest_client_requests_total{code,method,host},
// their latency in rest_client_request_duration_seconds{verb,host}. The
// same scrape carries evictd_build_info with its revision, and the landing
// page at / names the endpoints.
func TestAgentClientMetrics(t *testing.T) {
	const node = "client-metrics-node"
	c, _, token := startNodeCluster(t, node)
	kubeconfig := writeTokenKubeconfig(t, c, t.TempDir(), token)
	u, err := url.Parse(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := startNodeAgent(t, "evictd-client-metrics", kubeconfig, node)

	// The pod list and the Lease are among the first requests; their
	// series appear once client-go has counted them.
	host := u.Host
	var m map[string]float64
	poll(t, 30*time.Second, "the agent's API requests in its scrape", func() (bool, error) {
		m = testagent.ParseMetrics(t, testagent.WaitHTTP(t, "http://"+addr+"/metrics"))
		return m[`rest_client_requests_total{code="200",host="`+host+`",method="GET"}`] > 0 &&
			m[`rest_client_request_duration_seconds_count{host="`+host+`",verb="GET"}`] > 0, nil
	})
	var requests float64
	for series, v := range m {
		if strings.HasPrefix(series, "rest_client_requests_total{") {
			if !strings.Contains(series, `host="`+host+`"`) {
				t.Errorf("%s: want the API server's host %s", series, host)
			}
			requests += v
		}
	}
	t.Logf("%v requests counted in rest_client_requests_total", requests)

	var build string
	for series := range m {
		if strings.HasPrefix(series, "evictd_build_info{") {
			build = series
		}
	}
	if !strings.Contains(build, `revision="`) || strings.Contains(build, `revision=""`) {
		t.Errorf("evictd_build_info: got %q, want a revision", build)
	}
	page := testagent.WaitHTTP(t, "http://"+addr+"/")
	for _, want := range []string{`<a href="metrics">/metrics</a>`, `<a href="status">/status</a>`, `<a href="healthz">/healthz</a>`, "version "} {
		if !strings.Contains(page, want) {
			t.Errorf("landing page without %q:\n%s", want, page)
		}
	}
}

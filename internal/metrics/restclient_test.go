package metrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestRESTClient has a real client-go client ask a server that answers
// every request 404, and checks that its requests count on the registry
// RegisterRESTClient was given last, under the kubelet's names and labels.
// e2e/apiserver's TestAgentClientMetrics sees them in the agent's scrape
// against a real API server.
func TestRESTClient(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	get := func() {
		if _, err := client.CoreV1().Nodes().Get(t.Context(), "n", metav1.GetOptions{}); err == nil {
			t.Fatal("GET of a node from a server that answers 404: no error")
		}
	}

	first, second := prometheus.NewRegistry(), prometheus.NewRegistry()
	if err := RegisterRESTClient(first); err != nil {
		t.Fatal(err)
	}
	get()
	get()
	if err := RegisterRESTClient(second); err != nil {
		t.Fatal(err)
	}
	get()

	want := func(n string) string {
		return `
# HELP rest_client_requests_total Number of HTTP requests, partitioned by status code, method, and host.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="404",host="` + host + `",method="GET"} ` + n + `
`
	}
	for _, tc := range []struct {
		name string
		reg  *prometheus.Registry
		n    string
	}{{"first registry", first, "2"}, {"second registry", second, "1"}} {
		t.Run(tc.name, func(t *testing.T) {
			if err := testutil.GatherAndCompare(tc.reg, strings.NewReader(want(tc.n)), "rest_client_requests_total"); err != nil {
				t.Error(err)
			}
			// One latency series, its count the requests'.
			if got, err := testutil.GatherAndCount(tc.reg, "rest_client_request_duration_seconds"); err != nil || got != 1 {
				t.Errorf("rest_client_request_duration_seconds: %d series (err %v), want 1", got, err)
			}
			mfs, err := tc.reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				if mf.GetName() != "rest_client_request_duration_seconds" {
					continue
				}
				m := mf.GetMetric()[0]
				labels := map[string]string{}
				for _, lp := range m.GetLabel() {
					labels[lp.GetName()] = lp.GetValue()
				}
				if labels["verb"] != "GET" || labels["host"] != host || m.GetHistogram().GetSampleCount() != map[string]uint64{"2": 2, "1": 1}[tc.n] {
					t.Errorf("got %v with %d samples, want verb GET, host %s, %s samples", labels, m.GetHistogram().GetSampleCount(), host, tc.n)
				}
			}
		})
	}
	// Registering again on a registry that has them shares them.
	if err := RegisterRESTClient(second); err != nil {
		t.Errorf("RegisterRESTClient again on the same registry: %v", err)
	}
}

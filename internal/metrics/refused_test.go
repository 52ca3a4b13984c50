package metrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCountRefusals sends requests through the wrapped transport to a
// server answering each path with its own code: 401 and 403 count, other
// failures and successes do not.
func TestCountRefusals(t *testing.T) {
	codes := map[string]int{"/ok": 200, "/unauthorized": 401, "/forbidden": 403, "/conflict": 409, "/throttled": 429, "/down": 503}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(codes[r.URL.Path])
	}))
	defer srv.Close()

	m := New(prometheus.NewRegistry())
	client := &http.Client{Transport: m.CountRefusals(http.DefaultTransport)}
	for _, path := range []string{"/ok", "/unauthorized", "/unauthorized", "/forbidden", "/conflict", "/throttled", "/down"} {
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != codes[path] {
			t.Fatalf("GET %s: got %d, want %d", path, resp.StatusCode, codes[path])
		}
	}
	want := `
# HELP evictd_api_requests_refused_total Requests to the API server refused for their credentials, by HTTP status code: 401 (the credential was not accepted: an expired or revoked token, one whose bound Node was deleted, an unknown client certificate), 403 (the credential was accepted, the request not allowed: RBAC, impersonation of the node, the Node authorizer or evictd's admission policy). Every request counts, the pod list and watch included.
# TYPE evictd_api_requests_refused_total counter
evictd_api_requests_refused_total{code="401"} 2
evictd_api_requests_refused_total{code="403"} 1
`
	if err := testutil.CollectAndCompare(m.refused, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// TestCountRefusalsNil checks that a nil *Metrics leaves the transport as
// it is.
func TestCountRefusalsNil(t *testing.T) {
	var m *Metrics
	if got := m.CountRefusals(http.DefaultTransport); got != http.DefaultTransport {
		t.Errorf("got %T, want http.DefaultTransport itself", got)
	}
}

package metrics

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// refusedCodes are evictd_api_requests_refused_total's codes: the API
// server's answers that no retry mends, only an operator.
var refusedCodes = []value[string]{
	{v: strconv.Itoa(http.StatusUnauthorized), means: "the credential was not accepted: an expired or revoked token, one whose bound Node was deleted, an unknown client certificate"},
	{v: strconv.Itoa(http.StatusForbidden), means: "the credential was accepted, the request not allowed: RBAC, impersonation of the node, the Node authorizer or evictd's admission policy"},
}

func newRefused() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "evictd_api_requests_refused_total",
		Help: "Requests to the API server refused for their credentials, by HTTP status code: " + listed(refusedCodes) + ". Every request counts, the pod list and watch included.",
	}, []string{"code"})
}

// CountRefusals wraps a client's transport (rest.Config.Wrap) so that
// every response refused with 401 or 403 counts in
// evictd_api_requests_refused_total. On a nil *Metrics it returns rt.
func (m *Metrics) CountRefusals(rt http.RoundTripper) http.RoundTripper {
	if m == nil {
		return rt
	}
	return refusalCounter{next: rt, refused: m.refused}
}

type refusalCounter struct {
	next    http.RoundTripper
	refused *prometheus.CounterVec
}

func (c refusalCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err == nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		c.refused.WithLabelValues(strconv.Itoa(resp.StatusCode)).Inc()
	}
	return resp, err
}

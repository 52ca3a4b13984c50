package metrics

import (
	"context"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// client-go's request metrics, under the kubelet's names, labels and
// buckets (k8s.io/component-base/metrics/prometheus/restclient), so that
// the queries and dashboards written for the kubelet's API client work on
// evictd's. component-base's package is not used: its init registers
// every rest_client_* family on its global legacyregistry, which evictd
// does not serve; these are adapters onto evictd's own registry.
//
// Only the families that tell how evictd's requests fare are exported:
// requests by code, method and host, their latency by verb and host, and
// retries. The request and response sizes and the client-side rate
// limiter's latency, histograms of a dozen buckets per verb and host,
// are left to client-go's no-ops.

// restClientBuckets are the kubelet's rest_client_request_duration_seconds
// buckets, in seconds.
var restClientBuckets = []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0}

// restClient holds the rest_client_* collectors of one registry.
type restClient struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	retries  *prometheus.CounterVec
}

// client-go takes one set of adapters per process (its Register runs
// once): they count into the collectors of the last RegisterRESTClient,
// so that a second agent in one process (tests) counts on its own
// registry from then on. This is the process-wide state client-go
// imposes, and the only such in this package.
var (
	currentRESTClient atomic.Pointer[restClient]
	adaptersOnce      sync.Once
)

// RegisterRESTClient registers rest_client_requests_total{code,method,host},
// rest_client_request_duration_seconds{verb,host} and
// rest_client_request_retries_total{code,verb,host} on reg and has
// client-go count every request of every client of the process there,
// from then on.
func RegisterRESTClient(reg prometheus.Registerer) error {
	rc := &restClient{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_requests_total",
			Help: "Number of HTTP requests, partitioned by status code, method, and host.",
		}, []string{"code", "method", "host"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rest_client_request_duration_seconds",
			Help:    "Request latency in seconds. Broken down by verb, and host.",
			Buckets: restClientBuckets,
		}, []string{"verb", "host"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_request_retries_total",
			Help: "Number of request retries, partitioned by status code, verb, and host.",
		}, []string{"code", "verb", "host"}),
	}
	var errs []error
	rc.requests = registerOrShare(reg, rc.requests, &errs)
	rc.duration = registerOrShare(reg, rc.duration, &errs)
	rc.retries = registerOrShare(reg, rc.retries, &errs)
	if len(errs) > 0 {
		return errs[0]
	}
	currentRESTClient.Store(rc)
	adaptersOnce.Do(func() {
		clientmetrics.Register(clientmetrics.RegisterOpts{
			RequestLatency: requestLatency{},
			RequestResult:  requestResult{},
			RequestRetry:   requestRetry{},
		})
	})
	return nil
}

// requestLatency is client-go's LatencyMetric: the latency of each
// request, by verb and the URL's host.
type requestLatency struct{}

func (requestLatency) Observe(_ context.Context, verb string, u url.URL, latency time.Duration) {
	if rc := currentRESTClient.Load(); rc != nil {
		rc.duration.WithLabelValues(verb, u.Host).Observe(latency.Seconds())
	}
}

// requestResult is client-go's ResultMetric: each request's status code
// ("<error>" when it got no answer), by method and host.
type requestResult struct{}

func (requestResult) Increment(_ context.Context, code, method, host string) {
	if rc := currentRESTClient.Load(); rc != nil {
		rc.requests.WithLabelValues(code, method, host).Inc()
	}
}

// requestRetry is client-go's RetryMetric: each retry of a request.
type requestRetry struct{}

func (requestRetry) IncrementRetry(_ context.Context, code, method, host string) {
	if rc := currentRESTClient.Load(); rc != nil {
		rc.retries.WithLabelValues(code, method, host).Inc()
	}
}

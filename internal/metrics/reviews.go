package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Review is the review label of evictd_scrape_reviews_total and
// evictd_scrape_review_duration_seconds: which of the API server's reviews
// checked a scraper of /metrics or /status (--metrics-delegated-auth).
type Review string

// The reviews.
const (
	ReviewToken  Review = "token"
	ReviewAccess Review = "access"
)

var reviews = []value[Review]{
	{v: ReviewToken, means: "a TokenReview: who the bearer token is"},
	{v: ReviewAccess, means: "a SubjectAccessReview: whether that user may get the path"},
}

// ReviewResult is the result label of evictd_scrape_reviews_total.
type ReviewResult string

// The results of a review.
const (
	ReviewAuthenticated   ReviewResult = "authenticated"
	ReviewUnauthenticated ReviewResult = "unauthenticated"
	ReviewAllowed         ReviewResult = "allowed"
	ReviewDenied          ReviewResult = "denied"
	ReviewError           ReviewResult = "error"
)

var reviewResults = []value[ReviewResult]{
	{v: ReviewAuthenticated, means: "token"},
	{v: ReviewUnauthenticated, means: "token"},
	{v: ReviewAllowed, means: "access"},
	{v: ReviewDenied, means: "access"},
	{v: ReviewError, means: "either: no answer in time, or an answer that cannot be used"},
}

// reviewPairs are the review and result pairs that can happen.
var reviewPairs = []struct {
	review Review
	result ReviewResult
}{
	{ReviewToken, ReviewAuthenticated}, {ReviewToken, ReviewUnauthenticated}, {ReviewToken, ReviewError},
	{ReviewAccess, ReviewAllowed}, {ReviewAccess, ReviewDenied}, {ReviewAccess, ReviewError},
}

// A review is one request to the API server: from milliseconds to the
// review's timeout (5 s) when the API server is slow.
var reviewBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

func newReviews() (*prometheus.CounterVec, *prometheus.HistogramVec) {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "evictd_scrape_reviews_total",
			Help: "Reviews the API server made of a scraper of /metrics or /status (--metrics-delegated-auth), answers from evictd's cache not counted, by review: " + listed(reviews) +
				"; and result: " + listed(reviewResults) + ".",
		}, []string{"review", "result"}),
		prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "evictd_scrape_review_duration_seconds",
			Help:    "Time the API server took to answer a review of a scraper, by review (token, access), failures included.",
			Buckets: reviewBuckets,
		}, []string{"review"})
}

// ObserveReview counts one review the API server made, with its result
// and how long it took.
func (m *Metrics) ObserveReview(review Review, result ReviewResult, took time.Duration) {
	if m == nil {
		return
	}
	m.reviews.WithLabelValues(string(review), string(result)).Inc()
	m.reviewDur.WithLabelValues(string(review)).Observe(took.Seconds())
}

// ReviewCounter is the series of evictd_scrape_reviews_total of review
// and result, for tests.
func (m *Metrics) ReviewCounter(review Review, result ReviewResult) prometheus.Counter {
	return m.reviews.WithLabelValues(string(review), string(result))
}

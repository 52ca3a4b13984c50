package metrics

import "github.com/prometheus/client_golang/prometheus"

// TokenRenewal is the result label of evictd_token_renewals_total.
type TokenRenewal string

// The results of a renewal of the kubeconfig's node-bound token.
const (
	TokenRenewed TokenRenewal = "renewed"
	TokenFailed  TokenRenewal = "failed"
)

var tokenRenewals = []value[TokenRenewal]{
	{v: TokenRenewed, means: "a new token written over the tokenFile"},
	{v: TokenFailed, means: "the tokenFile unreadable or refused, the API server away or refusing; retried with backoff, the old token kept"},
}

func newRenewals() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "evictd_token_renewals_total",
		Help: "Renewals of the kubeconfig's node-bound ServiceAccount token (--token-renewal), by result: " + listed(tokenRenewals) + ". Nothing counts where the token is not renewed.",
	}, []string{"result"})
}

// CountTokenRenewal counts a renewal of the kubeconfig's token: renewed
// when err is nil, failed otherwise.
func (m *Metrics) CountTokenRenewal(err error) {
	if m == nil {
		return
	}
	r := TokenRenewed
	if err != nil {
		r = TokenFailed
	}
	m.renewals.WithLabelValues(string(r)).Inc()
}

package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Credential is the credential label of
// evictd_credential_expiry_timestamp_seconds.
type Credential string

// evictd's API credentials.
const (
	CredentialToken      Credential = "token"
	CredentialClientCert Credential = "client-certificate"
)

var credentials = []value[Credential]{
	{v: CredentialToken, means: "the kubeconfig's token or tokenFile, a JWT with an exp claim"},
	{v: CredentialClientCert, means: "the kubeconfig's client certificate"},
}

// CredentialExpiries returns when each credential evictd authenticates
// with expires; a zero time (or a credential left out) has no series.
type CredentialExpiries func() map[Credential]time.Time

// expiryCollector exports evictd_credential_expiry_timestamp_seconds from
// its source, called at each scrape: the files are read when Prometheus
// asks, so a rotated credential shows at the next scrape, with no loop.
type expiryCollector struct {
	desc *prometheus.Desc

	mu     sync.Mutex
	source CredentialExpiries
}

func newExpiryCollector() *expiryCollector {
	return &expiryCollector{desc: prometheus.NewDesc(
		"evictd_credential_expiry_timestamp_seconds",
		"When the credential evictd authenticates to the API server with expires, in seconds since the epoch, read at each scrape, by credential: "+listed(credentials)+". No series for a credential evictd does not use or whose expiry it cannot know (an opaque token).",
		[]string{"credential"}, nil,
	)}
}

func (c *expiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *expiryCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	source := c.source
	c.mu.Unlock()
	if source == nil {
		return
	}
	got := source()
	for _, cr := range credentials {
		if at := got[cr.v]; !at.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(at.Unix()), string(cr.v))
		}
	}
}

// SetCredentialExpiries makes evictd_credential_expiry_timestamp_seconds
// ask source at each scrape; nil exports nothing.
func (m *Metrics) SetCredentialExpiries(source CredentialExpiries) {
	if m == nil {
		return
	}
	m.expiry.mu.Lock()
	defer m.expiry.mu.Unlock()
	m.expiry.source = source
}

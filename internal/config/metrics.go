package config

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net"
	"os"

	"github.com/evictd/evictd/internal/secretfile"
)

// checkMetricsAccess validates the TLS, bearer-token and delegated
// authentication flags of the metrics endpoint into c, refusing (through fail) a private key or token
// file that group or others can read or write (secretfile.Check), and
// notes a non-loopback --metrics-bind-address served with neither. That is a note, not a refusal: an agent that does
// not start leaves the node unguarded against pressure, which is worse than
// metrics readable from the network; and a node firewall or a private
// network may already stand in front of the port.
func (o *Options) checkMetricsAccess(c *Config, src func(string) string, bad func(flag, value, why string), fail func(error)) {
	c.MetricsTLSCertFile, c.MetricsTLSPrivateKeyFile, c.MetricsBearerTokenFile = o.metricsTLSCert, o.metricsTLSKey, o.metricsTokenFile
	c.MetricsDelegatedAuth = o.metricsDelegatedAuth
	if o.metricsDelegatedAuth && o.kubeconfig == "" {
		bad("metrics-delegated-auth", "true", "needs "+src("kubeconfig")+": the API server reviews the scrapers' tokens")
	}
	cert, key := o.metricsTLSCert, o.metricsTLSKey
	switch {
	case cert != "" && key == "":
		bad("metrics-tls-cert-file", cert, "needs "+src("metrics-tls-private-key-file")+" too")
	case cert == "" && key != "":
		bad("metrics-tls-private-key-file", key, "needs "+src("metrics-tls-cert-file")+" too")
	case cert != "":
		certOK, keyOK := true, true
		if _, err := os.Stat(cert); err != nil {
			bad("metrics-tls-cert-file", cert, err.Error())
			certOK = false
		}
		if _, err := os.Stat(key); err != nil {
			bad("metrics-tls-private-key-file", key, err.Error())
			keyOK = false
		} else if err := secretfile.Check(src("metrics-tls-private-key-file"), key); err != nil {
			fail(err)
			keyOK = false
		}
		if certOK && keyOK {
			if _, err := tls.LoadX509KeyPair(cert, key); err != nil {
				bad("metrics-tls-cert-file", cert, fmt.Sprintf("with %s %s: %v", src("metrics-tls-private-key-file"), key, err))
			}
		}
	}
	if f := o.metricsTokenFile; f != "" {
		if data, err := os.ReadFile(f); err != nil {
			bad("metrics-bearer-token-file", f, err.Error())
		} else if len(bytes.TrimSpace(data)) == 0 {
			bad("metrics-bearer-token-file", f, "the file holds no token")
		} else if err := secretfile.Check(src("metrics-bearer-token-file"), f); err != nil {
			fail(err)
		}
	}

	host, _, err := net.SplitHostPort(o.metricsBindAddress)
	if err != nil || isLoopback(host) {
		return
	}
	tokens := o.metricsTokenFile != "" || o.metricsDelegatedAuth
	switch {
	case cert == "" && !tokens:
		c.Notes = append(c.Notes, fmt.Sprintf("%s %s is not a loopback address and neither TLS (%s, %s) nor a bearer token (%s, %s) guards it: "+
			"anyone who reaches the port reads /metrics and /status (pod names, namespaces, decisions).",
			src("metrics-bind-address"), o.metricsBindAddress, src("metrics-tls-cert-file"), src("metrics-tls-private-key-file"), src("metrics-bearer-token-file"), src("metrics-delegated-auth")))
	case cert == "":
		c.Notes = append(c.Notes, fmt.Sprintf("%s %s is not a loopback address and serves plain HTTP: the bearer token crosses the network in clear; add %s and %s.",
			src("metrics-bind-address"), o.metricsBindAddress, src("metrics-tls-cert-file"), src("metrics-tls-private-key-file")))
	}
}

// isLoopback reports whether host (of a host:port) names only loopback
// addresses; "" (all interfaces) and other names do not.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

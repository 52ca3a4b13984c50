// Package server serves evictd's HTTP endpoints: a landing page at / that
// lists them, /metrics for Prometheus,
// /healthz and /readyz for probes and /status for the `evictd status`
// subcommand, over TLS and behind a bearer token when asked: one from a file, or one
// the API server reviews (delegated authentication and authorization); and,
// on an address of their own, /healthz and /readyz alone for the kubelet's
// probes, which connections to the first cannot crowd out (NewProbes).
package server

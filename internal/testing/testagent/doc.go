// Package testagent runs the evictd binary alone as a test's child process,
// with no kubelet and no node around it, and reads what the running agent
// serves: the end-to-end tiers that start evictd themselves (e2e/host,
// e2e/apiserver, e2e/guest) start it through here, always from the built
// binary of $EVICTD_BIN. It also holds the metrics served, by an agent or
// a registry, to docs/METRICS.md's table (metricsdoc.go).
package testagent

// Package monitoring holds evictd's Prometheus mixin: the alerting and
// recording rules (evictd-rules.yaml) with their promtool unit tests
// (tests/), the Grafana dashboard (dashboards/evictd.json) and the runbook
// (RUNBOOK.md). Its tests run promtool on the rules and check that every
// query of the rules and the dashboard names only metrics evictd exports.
package monitoring

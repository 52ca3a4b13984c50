// Package monitoring holds evictd's Prometheus mixin: the alerting and
// recording rules (evictd-rules.yaml) with their promtool unit tests
// (tests/), the Grafana dashboards (dashboards/evictd.json per node,
// dashboards/evictd-fleet.json across the fleet) and the runbook
// (RUNBOOK.md). Its tests run promtool on the rules and on the
// dashboards' queries, and check that every query of the rules and the
// dashboards names only metrics evictd exports.
package monitoring

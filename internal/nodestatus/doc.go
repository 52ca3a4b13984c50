// Package nodestatus publishes evictd's view of the node's pressure on the
// API server: evictd's own node conditions (a strategic-merge patch of
// nodes/status), its own NoSchedule taints (an update of the node with its
// resourceVersion) and a node event on every transition, written from one
// goroutine at once on a transition and as a heartbeat otherwise, retrying
// with backoff while the API server is away.
package nodestatus

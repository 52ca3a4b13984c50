// Package nodestatus publishes evictd's view of the node's pressure on the
// API server: evictd's own node conditions (a strategic-merge patch of
// nodes/status), its own NoSchedule taints (a JSON merge patch of the
// taint list carrying the node's resourceVersion) and a node event on
// every transition. It reads the node only through a watch of that one
// node, never by a GET, and writes from one goroutine: at once on a
// transition or when the node shows something else, otherwise once per
// report period (the kubelet's nodeStatusReportFrequency, jittered by
// ±50%), retrying with jittered backoff while the API server is away.
package nodestatus

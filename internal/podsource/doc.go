// Package podsource tells evictd which pods run on its node, read from the
// API server through informers (pods by spec.nodeName, PodDisruptionBudgets
// of all namespaces) and converted into ranking.Pod the way the kubelet's
// eviction manager sees them: QoS class, priority, critical or not, owner,
// requests as the kubelet computes them, local volumes. Answers come from
// the informers' cache, so evictd keeps deciding while the API server is
// away.
package podsource

// Package podsource tells evictd which pods run on its node, read from the
// API server through informers (pods by spec.nodeName, PodDisruptionBudgets
// of all namespaces) and converted into signals.Pod the way the kubelet's
// eviction manager sees them: QoS class, priority, critical or not, owner,
// requests as the kubelet computes them, local volumes. It also tells which
// of them evictd evicted and are still terminating, its evictions in flight,
// which outlive an evictd restart. Answers come from the informers' cache,
// so evictd keeps deciding while the API server is away.
package podsource

// Package evict carries out evictd's evictions through the API server: the
// policy/v1 Eviction subresource (a delete with the same grace period when a
// hard threshold meets a PodDisruptionBudget), a DisruptionTarget condition
// and a Warning Evicted event on the pod, then a bounded wait, on the
// node's pod cache rather than the API server, until the pod is gone.
package evict

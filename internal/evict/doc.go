// Package evict carries out evictd's evictions through the API server: the
// pod's terminal status as the kubelet's eviction leaves it (phase Failed,
// reason Evicted) with evictd's DisruptionTarget condition, after a dry run
// of the policy/v1 Eviction subresource for a soft threshold; a Warning
// Evicted event; then, reading the node's pod cache rather than the API
// server, a bounded wait until the kubelet has stopped the pod's
// containers, and its delete.
package evict

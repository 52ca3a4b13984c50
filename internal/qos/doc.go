// Package qos computes a pod's QoS class as Kubernetes does, for the pods
// evictd reads from the API server (internal/podsource) and for those of a
// node snapshot that `evictd simulate` replays (internal/snapshot), so that
// both see the same class for the same pod.
package qos

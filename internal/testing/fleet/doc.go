// Package fleet runs a fleet of evictd agents against one real control
// plane (internal/testing/testcluster with the controller manager and an
// audit log): N simulated nodes, each a Node object of a real kubelet's
// size with pods bound to it, a kubelet emulated by the harness (its node
// Lease and status reports, and the end of pods evicted from it) and one
// evictd process reading a generated /proc and cgroup tree
// (internal/testing/hosttree) under its node-bound ServiceAccount token;
// and it counts every request of the agents and of the emulated kubelets
// from the audit log.
package fleet

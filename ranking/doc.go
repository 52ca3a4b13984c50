// Package ranking orders a node's pods for eviction under one starved
// resource, the way the kubelet does, with evictd's deliberate additions
// (Guaranteed pods last, DaemonSet pods after their tier). It is pure: plain
// structs in, an ordered list with the deciding key of each pod out.
package ranking

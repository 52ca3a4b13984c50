// Package host reads this node's eviction signals and per-pod usage from its
// own files (/proc, the cgroup mount, the kubelet and image filesystems),
// with every root passed in through Config so tests can point it at fixture
// trees.
package host

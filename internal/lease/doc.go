// Package lease keeps a coordination.k8s.io Lease per node, evictd-<node>
// in evictd's own namespace, renewed while evictd runs: the cluster sees
// that a node's evictd is alive without evictd writing its Node, as the
// kubelet shows itself alive with its node Lease (KEP-589).
package lease

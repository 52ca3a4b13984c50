// Package e2e holds evictd's end-to-end scenarios on a whole real node
// (internal/testing/testnode): a kubelet on containerd with its own thresholds off,
// and the evictd binary beside it under its ServiceAccount. Run them with
// `make e2e` (as root); `make test` runs them too.
package e2e

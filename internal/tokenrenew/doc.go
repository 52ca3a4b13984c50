// Package tokenrenew keeps the node-bound ServiceAccount token in evictd's
// kubeconfig tokenFile valid: before it expires, it requests its successor
// through the TokenRequest API and writes it over the file, atomically.
package tokenrenew

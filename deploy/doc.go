// Package deploy holds evictd's Kubernetes manifests (rbac.yaml,
// policy.yaml); its tests apply them to a real API server and try the writes
// they must allow and refuse.
package deploy

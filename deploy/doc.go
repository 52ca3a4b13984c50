// Package deploy holds evictd's Kubernetes manifests (rbac.yaml,
// policy.yaml, flowcontrol.yaml); its tests apply them to a real API server,
// try the writes they must allow and refuse, and check where Priority and
// Fairness puts evictd's requests.
package deploy

// Package deploy holds evictd's Kubernetes manifests (rbac.yaml,
// policy.yaml, flowcontrol.yaml, daemonset-tolerations.yaml); its tests
// apply them to a real API server, try the writes they must allow and
// refuse, check where Priority and Fairness puts evictd's requests, and
// that DaemonSets get pods on a node under evictd's taints.
package deploy

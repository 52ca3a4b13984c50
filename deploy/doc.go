// Package deploy holds evictd's Kubernetes manifests (rbac.yaml,
// policy.yaml, flowcontrol.yaml, daemonset-tolerations.yaml,
// memory-pressure-toleration.yaml), generated from the Helm chart in
// chart/evictd, and a kustomize base over them; its tests render the chart
// and build the kustomizations with the real tools, apply them to a real API
// server, try the writes they must allow and refuse, check where Priority
// and Fairness puts evictd's requests, that DaemonSets get pods on a node
// under evictd's taints, and that the scheduler places pods that are not
// BestEffort, and only those, on a node under evictd's memory pressure.
package deploy

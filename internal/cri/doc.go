// Package cri reads what evictd needs from the container runtime over the
// CRI: the image (and container) filesystems the runtime reports, measured
// with statfs, and each pod's disk usage (writable layers from the runtime,
// logs and local volumes from the node's directories). It calls the runtime
// through k8s.io/cri-api's generated gRPC clients.
package cri

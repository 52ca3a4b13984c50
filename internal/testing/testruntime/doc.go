// Package testruntime starts a real container runtime for tests: a
// containerd of its own (from Debian's containerd and runc packages, see
// hack/install-runtime.sh) with its own config, socket, root and state, the
// root optionally on a small tmpfs or loop-mounted ext4 filesystem so that
// disk and inode pressure are real and small, and OCI images built locally
// from the static workload binary (hack/workload) and imported with ctr. It
// stops everything it started by PID and unmounts and removes what it made.
package testruntime

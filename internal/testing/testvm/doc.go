// Package testvm boots a cgroup v2 Linux guest under qemu (TCG) for the
// tests that need what this machine's cgroup v1 kernel cannot give: the
// unified hierarchy, its memory.events and per-cgroup PSI, and systemd as
// PID 1 on it. The guest runs Debian's kernel with the host's root over 9p,
// read-only under a writable overlay in memory, so the test binaries and
// evictd built on the host run in it unchanged; a directory shared with
// the host carries the script, its output and its exit code. qemu is
// stopped by PID whatever happens. ../shared/CGROUP-V2.md tells what was
// measured when this was first tried.
package testvm

// Package guest holds the end-to-end tier of the cgroup v2 guest
// (internal/testing/testvm: Debian's kernel under qemu, the host's root
// over 9p): the evictd binary of $EVICTD_BIN alone in a guest, against the
// kernel's own files, for the cgroupfs and systemd layouts
// (TestCgroupV2Node); `make install`'s unit under systemd as PID 1
// (TestSystemdNode); and the v2 detection benchmark (TestBenchV2, `make
// bench-v2`). The test binary runs itself again inside the guest, and
// starts evictd there from the same $EVICTD_BIN. Run it with `make
// e2e-guest` (as root, about a minute and a half); `make test` runs it too. A whole
// node with a real kubelet in a guest is the node tier's
// (e2e/node, TestKubeletV2Node).
package guest

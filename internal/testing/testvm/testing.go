package testvm

import (
	"os"
	"os/exec"
	"testing"
)

// Need skips t when this machine cannot boot a guest (not root, or no
// qemu or kernel), or fails it under CI=true, where hack/install-vm.sh
// (part of `make test`) has installed them.
func Need(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the guest's 9p export of / needs root")
	}
	_, qerr := exec.LookPath("qemu-system-x86_64")
	_, _, kerr := Kernel()
	if qerr == nil && kerr == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("no guest to boot under CI=true (hack/install-vm.sh): qemu: %v; kernel: %v", qerr, kerr)
	}
	t.Skipf("no guest to boot (run hack/install-vm.sh as root): qemu: %v; kernel: %v", qerr, kerr)
}

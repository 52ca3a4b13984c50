package childproc

import "syscall"

// sysProcAttr has the kernel kill a child when the test process dies without
// cleaning up (a panic, `go test -timeout`), so no control plane outlives the
// tests that started it. (The signal follows the OS thread that started the
// child; Go only ends a thread when a goroutine locked to it exits, which
// childproc never does.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

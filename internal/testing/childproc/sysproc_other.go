//go:build !linux

package childproc

import "syscall"

// sysProcAttr has nothing to add where there is no parent-death signal.
func sysProcAttr() *syscall.SysProcAttr { return nil }

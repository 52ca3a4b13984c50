//go:build !linux

package secretfile

// readOnlyMount is false where the mount's flags are not read.
func readOnlyMount(string) bool { return false }

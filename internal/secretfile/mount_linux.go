package secretfile

import "golang.org/x/sys/unix"

// readOnlyMount reports whether dir is on a mount that is read-only.
func readOnlyMount(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Flags&unix.ST_RDONLY != 0
}

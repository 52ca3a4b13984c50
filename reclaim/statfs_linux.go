package reclaim

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// StatfsAvailable returns the bytes available to unprivileged users on the
// filesystem holding path (statfs f_bavail × f_bsize, as the kubelet's
// nodefs.available).
func StatfsAvailable(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return int64(st.Bavail) * st.Bsize, nil
}

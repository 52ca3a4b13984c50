package secretfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Check returns nil if the file at path, a credential of the kind named
// (a flag such as --metrics-bearer-token-file, or a kubeconfig field such
// as tokenFile), is kept from everyone but its owner, and an error naming
// kind, path and what is wrong otherwise:
//
//   - it must be a regular file after symlinks: a kubelet's projected
//     token is a link into a ..data directory, and the file linked to is
//     what is read, so its mode is what counts;
//   - no permission bit for group or others (mode&0o077 == 0): chmod 600;
//   - it must belong to root or to evictd's own user. Like ssh with
//     StrictModes, evictd refuses a file another user owns, since that
//     user can rewrite it (point the kubeconfig at another server, swap a
//     token) or chmod it open at any time.
//
// A file that cannot be stat'ed is an error with the reason (no such file
// or directory, permission denied).
func Check(kind, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("%s %s: %w", kind, path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s %s: not a regular file", kind, path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s %s: mode %04o lets group or others read or write it; chmod 600 it", kind, path, perm)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if euid := os.Geteuid(); st.Uid != 0 && int(st.Uid) != euid {
			return fmt.Errorf("%s %s: owned by uid %d, neither root nor evictd's own user (uid %d), so that user can rewrite it; chown it", kind, path, st.Uid, euid)
		}
	}
	return nil
}

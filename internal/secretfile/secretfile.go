package secretfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
//     token) or chmod it open at any time;
//   - every directory the path goes through, from / and through every
//     symlink to the file, must belong to root or evictd's own user and be
//     writable by no one else (ssh's StrictModes check of the directories
//     above a key): whoever may write a directory may rename the file away
//     and put their own in its place. Two kinds of directory others may
//     write are safe and allowed: one with the sticky bit (/tmp; the
//     volume of a kubelet's projected token), where no one may rename or
//     remove what they do not own, and one on a read-only mount (a
//     container's configMap volume mounted readOnly, whose directory the
//     kubelet makes 0777), which no one may change through it.
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
	euid := os.Geteuid()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if st.Uid != 0 && int(st.Uid) != euid {
			return fmt.Errorf("%s %s: owned by uid %d, neither root nor evictd's own user (uid %d), so that user can rewrite it; chown it", kind, path, st.Uid, euid)
		}
	}
	if err := checkDirs(path, euid); err != nil {
		return fmt.Errorf("%s %s: %w", kind, path, err)
	}
	return nil
}

// maxLinks bounds the symlinks followed, as the kernel's 40.
const maxLinks = 40

// checkDirs checks every directory path goes through (checkDir), resolving
// symlinks one component at a time so that the directories of every link
// on the way are checked too, not only those of the file reached.
func checkDirs(path string, euid int) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	dir := "/"
	if err := checkDir(dir, euid); err != nil {
		return err
	}
	rest := split(abs)
	for links := 0; len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case ".":
			continue
		case "..":
			// Every directory above dir was checked on the way to it.
			dir = filepath.Dir(dir)
			continue
		}
		next := filepath.Join(dir, name)
		fi, err := os.Lstat(next)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if links++; links > maxLinks {
				return fmt.Errorf("more than %d symlinks on the way", maxLinks)
			}
			target, err := os.Readlink(next)
			if err != nil {
				return err
			}
			if filepath.IsAbs(target) {
				dir = "/"
			}
			rest = append(split(target), rest...)
			continue
		}
		if len(rest) == 0 {
			return nil // the file, checked by Check
		}
		if err := checkDir(next, euid); err != nil {
			return err
		}
		dir = next
	}
	return nil
}

func split(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// checkDir refuses a directory another user owns, or that group or others
// may write, unless it has the sticky bit or is on a read-only mount.
func checkDir(dir string, euid int) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if readOnlyMount(dir) {
		return nil
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != euid {
		return fmt.Errorf("directory %s is owned by uid %d, neither root nor evictd's own user (uid %d), so that user can put another file in its place; chown it", dir, st.Uid, euid)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("directory %s has mode %04o: group or others may write it, and so put another file in its place; chmod go-w it", dir, perm)
	}
	return nil
}

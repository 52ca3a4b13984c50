package secretfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// file writes a file with exactly mode (the umask does not apply).
func file(t *testing.T, path string, mode os.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func link(t *testing.T, target, path string) string {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// projected lays out a token as the kubelet's atomic writer does for a
// projected volume: dir/token -> ..data/token, ..data -> ..2025_01_01, the
// real file ..2025_01_01/token with mode.
func projected(t *testing.T, dir string, mode os.FileMode) string {
	t.Helper()
	file(t, filepath.Join(dir, "..2025_01_01", "token"), mode)
	link(t, "..2025_01_01", filepath.Join(dir, "..data"))
	return link(t, filepath.Join("..data", "token"), filepath.Join(dir, "token"))
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		path string
		want string // "" means accepted
	}{
		{"0600", file(t, filepath.Join(dir, "a"), 0o600), ""},
		{"0400", file(t, filepath.Join(dir, "b"), 0o400), ""},
		{"0700", file(t, filepath.Join(dir, "c"), 0o700), ""},
		{"0644", file(t, filepath.Join(dir, "d"), 0o644), "mode 0644 lets group or others read or write it; chmod 600 it"},
		{"0640", file(t, filepath.Join(dir, "e"), 0o640), "mode 0640 lets"},
		{"0604", file(t, filepath.Join(dir, "f"), 0o604), "mode 0604 lets"},
		{"0620 group may write", file(t, filepath.Join(dir, "g"), 0o620), "mode 0620 lets"},
		{"0602 others may write", file(t, filepath.Join(dir, "h"), 0o602), "mode 0602 lets"},
		{"0610 group may execute", file(t, filepath.Join(dir, "i"), 0o610), "mode 0610 lets"},
		{"0666", file(t, filepath.Join(dir, "j"), 0o666), "mode 0666 lets"},
		{"link to 0600", link(t, filepath.Join(dir, "a"), filepath.Join(dir, "link-a")), ""},
		{"link to 0644: the target's mode counts", link(t, filepath.Join(dir, "d"), filepath.Join(dir, "link-d")), "mode 0644 lets"},
		{"projected token 0600", projected(t, filepath.Join(dir, "p600"), 0o600), ""},
		{"projected token 0644", projected(t, filepath.Join(dir, "p644"), 0o644), "mode 0644 lets"},
		{"missing", filepath.Join(dir, "missing"), "no such file or directory"},
		{"dangling link", link(t, filepath.Join(dir, "gone"), filepath.Join(dir, "dangling")), "no such file or directory"},
		{"directory", dir, "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check("--token-file", tc.path)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got nil, want an error with %q", tc.want)
			}
			// The error names the kind and the path as given, then why.
			if want := "--token-file " + tc.path + ": " + tc.want; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("got %q, want it to start with %q", err, want)
			}
		})
	}
	if err := Check("k", filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: got %v, want an error that is fs.ErrNotExist", err)
	}
}

// TestCheckOwner refuses a file another user owns, even with mode 0600:
// that user could rewrite it or open it up. Only root can give a file away.
func TestCheckOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown a file to another user")
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name     string
		uid, gid int
		want     string
	}{
		{"root", 0, 0, ""},
		{"root, another group", 0, 4321, ""},
		{"another user", 4321, 0, "owned by uid 4321, neither root nor evictd's own user (uid 0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := file(t, filepath.Join(dir, tc.name), 0o600)
			if err := os.Chown(p, tc.uid, tc.gid); err != nil {
				t.Fatal(err)
			}
			err := Check("kubeconfig", p)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// mkdir makes dir with exactly mode (the umask does not apply).
func mkdir(t *testing.T, dir string, mode os.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestCheckDirectories refuses a credential whose directories, or those of
// a symlink on the way to it, someone else may write: they could rename
// the file away and put their own in its place. A sticky directory (/tmp,
// a projected volume's tmpfs) is safe.
func TestCheckDirectories(t *testing.T) {
	dir := t.TempDir() // 0700, under /tmp: root's 1777
	sticky := mkdir(t, filepath.Join(dir, "sticky"), 0o777|os.ModeSticky)
	open := mkdir(t, filepath.Join(dir, "open"), 0o777)
	group := mkdir(t, filepath.Join(dir, "group"), 0o775)
	good := mkdir(t, filepath.Join(dir, "good"), 0o755)
	file(t, filepath.Join(good, "token"), 0o600)
	file(t, filepath.Join(open, "token"), 0o600)
	for _, tc := range []struct {
		name string
		path string
		want string // "" means accepted
	}{
		{"0755 directories", filepath.Join(good, "token"), ""},
		{"a sticky directory others may write", file(t, filepath.Join(sticky, "token"), 0o600), ""},
		{"a projected volume on a sticky tmpfs", projected(t, filepath.Join(sticky, "projected"), 0o400), ""},
		{"in a directory others may write", filepath.Join(open, "token"), "directory " + open + " has mode 0777: group or others may write it, and so put another file in its place; chmod go-w it"},
		{"in a directory its group may write", file(t, filepath.Join(group, "token"), 0o600), "directory " + group + " has mode 0775"},
		{"two directories below one others may write", file(t, filepath.Join(open, "a", "b", "token"), 0o600), "directory " + open + " has mode 0777"},
		{"a link to a good file, in a directory others may write", link(t, filepath.Join(good, "token"), filepath.Join(open, "link")), "directory " + open + " has mode 0777"},
		{"a link to a file in a directory others may write", link(t, filepath.Join(open, "token"), filepath.Join(good, "link-open")), "directory " + open + " has mode 0777"},
		{"a relative link through ..", link(t, filepath.Join("..", "open", "token"), filepath.Join(good, "link-up")), "directory " + open + " has mode 0777"},
		{"a link to a link in a directory others may write", link(t, filepath.Join(open, "link"), filepath.Join(good, "link-link")), "directory " + open + " has mode 0777"},
		{"a link to a directory, then the file", filepath.Join(link(t, good, filepath.Join(sticky, "good-dir")), "token"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check("--token-file", tc.path)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if want := "--token-file " + tc.path + ": " + tc.want; err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("got %v, want an error starting with %q", err, want)
			}
		})
	}
	loop := link(t, "loop-b", filepath.Join(good, "loop-a"))
	link(t, "loop-a", filepath.Join(good, "loop-b"))
	if err := Check("k", loop); err == nil {
		t.Error("a symlink loop: got nil, want an error")
	}
}

// TestCheckDirectoryOwner refuses a directory on the way that another
// user owns, even 0755: that user may rename the file away.
func TestCheckDirectoryOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown a directory to another user")
	}
	dir := mkdir(t, filepath.Join(t.TempDir(), "theirs"), 0o755)
	if err := os.Chown(dir, 4321, 0); err != nil {
		t.Fatal(err)
	}
	p := file(t, filepath.Join(dir, "token"), 0o600)
	want := "k " + p + ": directory " + dir + " is owned by uid 4321, neither root nor evictd's own user (uid 0), so that user can put another file in its place; chown it"
	if err := Check("k", p); err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
	// The same under a sticky directory.
	sticky := mkdir(t, filepath.Join(t.TempDir(), "sticky"), 0o777|os.ModeSticky)
	if err := os.Chown(sticky, 4321, 0); err != nil {
		t.Fatal(err)
	}
	if err := Check("k", file(t, filepath.Join(sticky, "token"), 0o600)); err == nil || !strings.Contains(err.Error(), "is owned by uid 4321") {
		t.Errorf("a sticky directory another user owns: got %v, want it refused", err)
	}
}

// TestCheckReadOnlyMount accepts a directory others may write when it is
// on a read-only mount, as a container's configMap volume (the kubelet
// makes its directory 0777 and mounts it read-only): nothing can change
// it through the mount.
func TestCheckReadOnlyMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to bind-mount a directory read-only")
	}
	dir := t.TempDir()
	src := mkdir(t, filepath.Join(dir, "volume"), 0o777)
	file(t, filepath.Join(src, "kubeconfig"), 0o400)
	mnt := mkdir(t, filepath.Join(dir, "etc-evictd"), 0o755)
	if err := unix.Mount(src, mnt, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	path := filepath.Join(mnt, "kubeconfig")
	if err := Check("--kubeconfig", path); err == nil || !strings.Contains(err.Error(), "directory "+mnt+" has mode 0777") {
		t.Errorf("read-write: got %v, want the directory refused", err)
	}
	if err := unix.Mount("", mnt, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount read-only: %v", err)
	}
	if err := Check("--kubeconfig", path); err != nil {
		t.Errorf("read-only: got %v, want nil", err)
	}
}

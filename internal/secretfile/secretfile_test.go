package secretfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

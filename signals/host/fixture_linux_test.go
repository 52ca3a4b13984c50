package host

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// fixture is the absolute path of a tree under testdata.
func fixture(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// copyFixture copies a testdata tree to a temporary directory, so a test can
// break one file of it.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	src := fixture(t, name)
	dst := filepath.Join(t.TempDir(), name)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// edit changes files of a tree: a nil content removes the file or directory.
func edit(t *testing.T, root string, files map[string]*string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(root, rel)
		if content == nil {
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(*content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func str(s string) *string { return &s }

// fixtureConfig points a configuration at fixture trees; the kubelet root
// dir is a real temporary directory.
func fixtureConfig(t *testing.T, proc, cgroup, driver string) Config {
	t.Helper()
	return Config{
		ProcRoot:       proc,
		CgroupMount:    cgroup,
		CgroupRoot:     "/",
		CgroupDriver:   driver,
		KubeletRootDir: t.TempDir(),
	}
}

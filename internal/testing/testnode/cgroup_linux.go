package testnode

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/evictd/evictd/internal/testing/testruntime"
)

// cgroupMount is where the cgroup hierarchies are mounted: this
// machine's v1 hierarchies, one directory per controller, or a guest's
// unified (v2) hierarchy.
const cgroupMount = "/sys/fs/cgroup"

// unified tells whether cgroupMount is the unified (v2) hierarchy.
func unified() bool { return cgroups.Mode() == cgroups.Unified }

// createCgroupRoot creates the kubelet's --cgroup-root in every v1
// hierarchy, or in the unified one with every controller the root offers
// enabled down to it (the kubelet refuses a root that does not exist).
func createCgroupRoot(rel string) error {
	if !unified() {
		if _, err := cgroup1.New(cgroup1.StaticPath(rel), &specs.LinuxResources{}); err != nil {
			return fmt.Errorf("create cgroup %s: %w", rel, err)
		}
		return nil
	}
	avail, err := os.ReadFile(filepath.Join(cgroupMount, "cgroup.controllers"))
	if err != nil {
		return err
	}
	enable := "+" + strings.Join(strings.Fields(string(avail)), " +")
	dir := filepath.Join(cgroupMount, rel)
	for _, d := range []string{cgroupMount, filepath.Dir(dir)} {
		if err := os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte(enable), 0o644); err != nil {
			return fmt.Errorf("enable %s in %s: %w", enable, d, err)
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("create cgroup %s: %w", rel, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(enable), 0o644); err != nil {
		return fmt.Errorf("enable %s in %s: %w", enable, dir, err)
	}
	return nil
}

// cgroupRoots returns the directories of the cgroup rel that exist: one
// per v1 hierarchy, or the unified hierarchy's.
func cgroupRoots(rel string) ([]string, error) {
	if !unified() {
		return filepath.Glob(filepath.Join(cgroupMount, "*", rel))
	}
	dir := filepath.Join(cgroupMount, rel)
	if _, err := os.Stat(dir); err != nil {
		return nil, nil
	}
	return []string{dir}, nil
}

// unmountCgroupTree unmounts whatever is mounted below the cgroup rel in
// every hierarchy (a test's overlay of a cgroup file, left by a
// failure). It comes before RemoveCgroupTree: removing a cgroup does not
// remove a mount over one of its files, which then outlives the node and
// can no longer be unmounted by its path.
func unmountCgroupTree(rel string) error {
	roots, err := cgroupRoots(rel)
	if err != nil {
		return err
	}
	var errs []error
	for _, root := range roots {
		errs = append(errs, testruntime.UnmountUnder(root))
	}
	return errors.Join(errs...)
}

// RemoveCgroupTree removes the cgroup rel and every cgroup below it in
// every hierarchy, deepest first. A cgroup whose last task just exited
// can be busy for a moment, so each removal is retried for up to two
// seconds.
func RemoveCgroupTree(rel string) error {
	roots, err := cgroupRoots(rel)
	if err != nil {
		return err
	}
	var errs []error
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			var err error
			for range 100 {
				if err = os.Remove(d); err == nil || errors.Is(err, fs.ErrNotExist) {
					err = nil
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// readMemTotal returns MemTotal of a /proc/meminfo file, in bytes.
func readMemTotal(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == "MemTotal:" && fields[2] == "kB" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil || kb <= 0 {
				return 0, fmt.Errorf("%s: MemTotal %q: not a positive number", path, fields[1])
			}
			return kb << 10, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return 0, fmt.Errorf("%s: no MemTotal line", path)
}

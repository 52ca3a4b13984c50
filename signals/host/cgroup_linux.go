package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
)

// containerd/cgroups lays out the controllers (cgroup1.NewMemory(mount).Path,
// cgroup1.NewPids) and lists the cgroup2 root controllers. The figures
// themselves are read by the strict readers of parse.go: the library's
// parsers turn a negative value into 0 (cgroup1/utils.go and cgroup2/utils.go
// parseUint), read an absent memory.stat key as 0, and on cgroup v2 log and
// return 0 for a garbled single-value file, and a zero working set would
// claim the node has all its memory free.

// cgroupVersion is the cgroup hierarchy a mount holds.
type cgroupVersion int

const (
	cgroupV1 cgroupVersion = 1
	cgroupV2 cgroupVersion = 2
)

// unlimitedAbove is the largest memory limit that is a limit: cgroup v1
// writes an unlimited memory.limit_in_bytes as about 1<<63 rounded down to a
// page, and the kubelet (through cAdvisor) treats anything above 1<<62 as
// unlimited.
const unlimitedAbove = int64(1) << 62

// cgroups reads memory and task figures of the cgroups under one mount.
type cgroups struct {
	mount    string
	driver   string
	kubepods cgroupName
}

func newCgroups(cfg Config) (*cgroups, error) {
	root, err := rootCgroupName(cfg.CgroupRoot, cfg.CgroupDriver)
	if err != nil {
		return nil, fmt.Errorf("cgroup root %q: %w", cfg.CgroupRoot, err)
	}
	return &cgroups{mount: cfg.CgroupMount, driver: cfg.CgroupDriver, kubepods: kubepodsName(root)}, nil
}

// version tells cgroup v1 from v2: v1 has a memory controller directory with
// memory.usage_in_bytes; v2 lists memory in the root cgroup.controllers.
func (c *cgroups) version() (cgroupVersion, error) {
	probe := filepath.Join(cgroup1.NewMemory(c.mount).Path("/"), "memory.usage_in_bytes")
	_, err := os.Stat(probe)
	if err == nil {
		return cgroupV1, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("stat %s: %w", probe, err)
	}
	m, err := cgroup2.Load("/", cgroup2.WithMountpoint(c.mount))
	if err != nil {
		return 0, fmt.Errorf("cgroup2 mount %s: %w", c.mount, err)
	}
	controllers, err := m.RootControllers()
	if err != nil {
		return 0, fmt.Errorf("%s is not a cgroup v1 mount (no %s) nor a cgroup v2 mount: read %s: %w",
			c.mount, probe, filepath.Join(c.mount, "cgroup.controllers"), err)
	}
	if !slices.Contains(controllers, "memory") {
		return 0, fmt.Errorf("%s: cgroup v2 without the memory controller (cgroup.controllers lists %q)", c.mount, controllers)
	}
	return cgroupV2, nil
}

// memoryDir is the directory of name in the memory hierarchy.
func (c *cgroups) memoryDir(v cgroupVersion, name cgroupName) string {
	if v == cgroupV1 {
		return cgroup1.NewMemory(c.mount).Path(name.path(c.driver))
	}
	return filepath.Join(c.mount, name.path(c.driver))
}

// pidsDir is the directory of name in the pids hierarchy.
func (c *cgroups) pidsDir(v cgroupVersion, name cgroupName) string {
	if v == cgroupV1 {
		return cgroup1.NewPids(c.mount).Path(name.path(c.driver))
	}
	return filepath.Join(c.mount, name.path(c.driver))
}

// memoryCgroup is name's cgroup in the memory hierarchy; the empty name is
// the root cgroup.
func (c *cgroups) memoryCgroup(v cgroupVersion, name cgroupName) MemoryCgroup {
	return MemoryCgroup{Dir: c.memoryDir(v, name), V2: v == cgroupV2, Root: len(name) == 0}
}

// MemoryCgroup is one memory cgroup directory and what reading its figures
// depends on: whether the hierarchy is cgroup v2, and whether the cgroup is
// the root, which on cgroup v2 has no memory.current. It is the one reader
// of a cgroup's working set, for the signal sources here and for the
// wake-up sources that watch the same cgroups between passes.
type MemoryCgroup struct {
	Dir  string
	V2   bool
	Root bool
}

// WorkingSet is usage minus inactive file pages of the cgroup, clamped at
// 0, as cAdvisor computes it: memory.usage_in_bytes on v1, memory.current
// on v2, and on the v2 root anon + file from memory.stat, as runc emulates
// it. A sum that overflows int64 (only a garbled file can make one) is an
// error, not a wrapped figure.
func (c MemoryCgroup) WorkingSet() (int64, error) {
	var usage, inactive int64
	switch {
	case !c.V2:
		u, err := readCount(filepath.Join(c.Dir, "memory.usage_in_bytes"))
		if err != nil {
			return 0, err
		}
		in, err := c.InactiveFile()
		if err != nil {
			return 0, err
		}
		usage, inactive = u, in
	case c.Root:
		stat := filepath.Join(c.Dir, "memory.stat")
		st, err := readKeyed(stat, "anon", "file", "inactive_file")
		if err != nil {
			return 0, err
		}
		u, err := add(st["anon"], st["file"])
		if err != nil {
			return 0, fmt.Errorf("%s: anon + file: %w", stat, err)
		}
		usage, inactive = u, st["inactive_file"]
	default:
		u, err := readCount(filepath.Join(c.Dir, "memory.current"))
		if err != nil {
			return 0, err
		}
		in, err := c.InactiveFile()
		if err != nil {
			return 0, err
		}
		usage, inactive = u, in
	}
	return max(usage-inactive, 0), nil
}

// InactiveFile is the cgroup's inactive page cache in bytes, the part of its
// usage that the working set leaves out: total_inactive_file from
// memory.stat on v1 (the whole subtree, as memory.usage_in_bytes counts
// it), inactive_file on v2.
func (c MemoryCgroup) InactiveFile() (int64, error) {
	key := "total_inactive_file"
	if c.V2 {
		key = "inactive_file"
	}
	st, err := readKeyed(filepath.Join(c.Dir, "memory.stat"), key)
	if err != nil {
		return 0, err
	}
	return st[key], nil
}

// memoryLimit is the memory limit of the cgroup in dir; ok is false when it
// has none (v1 memory.limit_in_bytes above 1<<62, v2 memory.max "max").
func memoryLimit(v cgroupVersion, dir string) (limit int64, ok bool, err error) {
	file := filepath.Join(dir, "memory.limit_in_bytes")
	if v == cgroupV2 {
		file = filepath.Join(dir, "memory.max")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false, fmt.Errorf("read %s: %w", file, err)
	}
	return parseMemoryLimit(v, file, b)
}

// parseMemoryLimit parses b, the content of file (memory.limit_in_bytes on
// v1, memory.max on v2), as memoryLimit does.
func parseMemoryLimit(v cgroupVersion, file string, b []byte) (limit int64, ok bool, err error) {
	s := strings.TrimSpace(string(b))
	if v == cgroupV2 && s == "max" {
		return 0, false, nil
	}
	limit, err = parseCount(file, s)
	if err != nil {
		return 0, false, err
	}
	if limit > unlimitedAbove {
		return 0, false, nil
	}
	if limit == 0 {
		return 0, false, fmt.Errorf("parse %s: memory limit is 0", file)
	}
	return limit, true, nil
}

// tasks is the number of tasks (threads) in the cgroup in the pids
// hierarchy directory dir and its descendants: pids.current, on v1 and v2.
func tasks(dir string) (int64, error) {
	return readCount(filepath.Join(dir, "pids.current"))
}

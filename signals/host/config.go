package host

import (
	"errors"
	"fmt"
	"path/filepath"
)

// The two cgroup drivers the kubelet knows (--cgroup-driver).
const (
	DriverCgroupfs = "cgroupfs"
	DriverSystemd  = "systemd"
)

// Config says where this host's files are. Every path is absolute; nothing in
// this package reads a path that does not come from here (cadvisor's own
// reads of /proc/self/mountinfo and /proc/diskstats excepted).
type Config struct {
	// ProcRoot is the proc filesystem. Default "/proc".
	ProcRoot string
	// CgroupMount is where the cgroup filesystem is mounted: the cgroup2
	// mount itself, or the tmpfs holding one directory per cgroup v1
	// controller. Default "/sys/fs/cgroup".
	CgroupMount string
	// CgroupRoot is the kubelet's --cgroup-root, the cgroup (relative to
	// each controller's mount) that holds kubepods. Default "/". With the
	// systemd driver it must be "/" or a slice such as "/evictd.slice".
	CgroupRoot string
	// CgroupDriver is the kubelet's --cgroup-driver: "cgroupfs" (pods in
	// kubepods/burstable/pod<uid>) or "systemd" (pods in
	// kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice).
	// Default "cgroupfs".
	CgroupDriver string
	// KubeletRootDir is the kubelet's --root-dir; the filesystem holding it
	// is nodefs. Default "/var/lib/kubelet".
	KubeletRootDir string
	// ImageFsPath is a directory on the runtime's image filesystem (for
	// example containerd's root, /var/lib/containerd). Empty (the default)
	// means none is configured and no imagefs signals are observed here.
	ImageFsPath string
	// ReservedMemory is system-reserved plus kube-reserved memory, in bytes.
	// It is used only when the kubepods cgroup has no memory limit:
	// allocatable capacity is then MemTotal minus ReservedMemory. Default 0.
	ReservedMemory int64
	// DisableHugepageAwareEviction computes memory.available as kubelet
	// 1.36 does, and kubelet 1.37 with its feature gate
	// HugepageAwareEviction set to false: MemTotal minus the root cgroup's
	// working set, the node's hugepages left in. Default false: kubelet
	// 1.37's memory.available, the hugepage capacity (the Hugetlb line of
	// ProcRoot/meminfo) subtracted as well (signals.HugepageAware).
	DisableHugepageAwareEviction bool
}

// DefaultConfig is the configuration of a kubelet with default flags.
func DefaultConfig() Config {
	return Config{
		ProcRoot:       "/proc",
		CgroupMount:    "/sys/fs/cgroup",
		CgroupRoot:     "/",
		CgroupDriver:   DriverCgroupfs,
		KubeletRootDir: "/var/lib/kubelet",
	}
}

// Validate rejects a configuration this package cannot read a node with,
// naming every bad field and its value.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, flag string, value any, why string) {
		errs = append(errs, fmt.Errorf("invalid configuration: %s (%s) %q: %s", field, flag, value, why))
	}
	for _, f := range []struct {
		field, flag, value string
		optional           bool
	}{
		{"ProcRoot", "proc root", c.ProcRoot, false},
		{"CgroupMount", "cgroup mount", c.CgroupMount, false},
		{"KubeletRootDir", "--root-dir", c.KubeletRootDir, false},
		{"ImageFsPath", "imagefs path", c.ImageFsPath, true},
	} {
		switch {
		case f.value == "" && f.optional:
		case f.value == "":
			bad(f.field, f.flag, f.value, "must be set")
		case !filepath.IsAbs(f.value):
			bad(f.field, f.flag, f.value, "must be an absolute path")
		}
	}
	switch c.CgroupDriver {
	case DriverCgroupfs, DriverSystemd:
	default:
		bad("CgroupDriver", "--cgroup-driver", c.CgroupDriver, `must be "cgroupfs" or "systemd"`)
	}
	if _, err := rootCgroupName(c.CgroupRoot, c.CgroupDriver); err != nil {
		bad("CgroupRoot", "--cgroup-root", c.CgroupRoot, err.Error())
	}
	if c.ReservedMemory < 0 {
		errs = append(errs, fmt.Errorf("invalid configuration: ReservedMemory (--system-reserved + --kube-reserved memory) %d: must not be negative", c.ReservedMemory))
	}
	return errors.Join(errs...)
}

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/evictd/evictd/signals/host"
)

// --cgroup-driver against the cgroup tree on disk: the kubelet's
// cgroupfs driver makes kubepods, its systemd driver kubepods.slice
// (under --cgroup-root, in --cgroup-mount's memory hierarchy). With the
// wrong one the agent finds no kubepods, hence no
// allocatableMemory.available and no pod cgroups. check-config and
// doctor both ask.

// kubepodsFinding is where the pods' parent cgroup is for the configured
// driver and for the other one, and which of them exists.
type kubepodsFinding struct {
	Driver, Dir string
	Exists      bool
	// Other is the other driver; OtherDir is "" when --cgroup-root does
	// not name a cgroup under it (a systemd root must be a slice).
	Other, OtherDir string
	OtherExists     bool
	V2              bool
}

// findKubepods looks for the kubepods memory cgroup hc names, and for
// the one the other driver would name.
func findKubepods(hc host.Config) (kubepodsFinding, error) {
	_, dir, v2, err := host.MemoryCgroupDirs(hc)
	if err != nil {
		return kubepodsFinding{}, err
	}
	f := kubepodsFinding{Driver: hc.CgroupDriver, Dir: dir, V2: v2, Other: host.DriverSystemd}
	if hc.CgroupDriver == host.DriverSystemd {
		f.Other = host.DriverCgroupfs
	}
	if f.Exists, err = dirExists(dir); err != nil {
		return f, err
	}
	other := hc
	other.CgroupDriver = f.Other
	if _, odir, _, err := host.MemoryCgroupDirs(other); err == nil {
		f.OtherDir = odir
		if f.OtherExists, err = dirExists(odir); err != nil {
			return f, err
		}
	}
	return f, nil
}

func dirExists(dir string) (bool, error) {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	}
	return st.IsDir(), nil
}

// verdict says whether the driver matches the tree: ok; a mismatch (the
// other driver's kubepods exists, this one's does not); or unknown,
// neither exists (no kubelet has run here, or --cgroup-root is wrong).
func (f kubepodsFinding) verdict() (status checkStatus, msg string) {
	switch {
	case f.Exists:
		return statusOK, fmt.Sprintf("--cgroup-driver=%s: the pods' cgroup %s exists", f.Driver, f.Dir)
	case f.OtherExists:
		return statusFail, fmt.Sprintf("--cgroup-driver=%s names %s, which does not exist, but %s does: the kubelet uses the %s driver; set --cgroup-driver=%s",
			f.Driver, f.Dir, f.OtherDir, f.Other, f.Other)
	}
	return statusWarn, fmt.Sprintf("--cgroup-driver=%s: neither %s nor the %s driver's kubepods exists: no kubelet has made the pods' cgroup yet, or --cgroup-root or --cgroup-mount is wrong",
		f.Driver, f.Dir, f.Other)
}

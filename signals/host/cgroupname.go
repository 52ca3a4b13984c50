package host

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/evictd/evictd/signals"
)

// cgroupName is a cgroup as the kubelet names it: a list of components that
// each driver turns into a path its own way.
type cgroupName []string

// rootCgroupName parses --cgroup-root as the kubelet does for driver.
func rootCgroupName(root, driver string) (cgroupName, error) {
	if root == "" || !strings.HasPrefix(root, "/") {
		return nil, errors.New("must be an absolute cgroup path such as /")
	}
	if filepath.Clean(root) != root {
		return nil, errors.New("must be a clean path")
	}
	if root == "/" {
		return nil, nil
	}
	if driver != DriverSystemd {
		return cgroupName(strings.Split(strings.TrimPrefix(root, "/"), "/")), nil
	}
	base := filepath.Base(root)
	if !strings.HasSuffix(base, ".slice") || base == ".slice" {
		return nil, errors.New(`with the systemd driver it must be "/" or a slice ending in .slice`)
	}
	var name cgroupName
	for _, part := range strings.Split(strings.TrimSuffix(base, ".slice"), "-") {
		if part == "" {
			return nil, errors.New("slice name has an empty component")
		}
		name = append(name, strings.ReplaceAll(part, "_", "-"))
	}
	if want := name.systemd(); want != root {
		return nil, fmt.Errorf("slice %s lives at %s under systemd", base, want)
	}
	return name, nil
}

// child is n with one more component.
func (n cgroupName) child(component string) cgroupName {
	out := make(cgroupName, len(n), len(n)+1)
	copy(out, n)
	return append(out, component)
}

// path is where n lives relative to a controller's mount, for driver.
func (n cgroupName) path(driver string) string {
	if driver == DriverSystemd {
		return n.systemd()
	}
	return "/" + strings.Join(n, "/")
}

// systemd expands n into nested slices, as the kubelet's ToSystemd does:
// {kubepods, burstable, pod1-2} is
// /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice.
//
// Kept over opencontainers/cgroups' systemd.ExpandSlice (the kubelet's), measured: it links 10 packages (+80 KB), an os/exec importer, cilium/ebpf v0.16→v0.17 and fs's init(), a statfs of /sys/fs/cgroup/unified at every start.
func (n cgroupName) systemd() string {
	if len(n) == 0 {
		return "/"
	}
	var b strings.Builder
	prefix := ""
	for _, part := range n {
		prefix += strings.ReplaceAll(part, "-", "_")
		b.WriteString("/" + prefix + ".slice")
		prefix += "-"
	}
	return b.String()
}

// childComponent is the inverse of child for one directory entry: the
// component that, added to parent, gives a cgroup whose last path element is
// dir. ok is false when dir is not a child cgroup name for driver.
func (n cgroupName) childComponent(driver, dir string) (string, bool) {
	if driver != DriverSystemd {
		return dir, dir != ""
	}
	prefix := ""
	for _, part := range n {
		prefix += strings.ReplaceAll(part, "-", "_") + "-"
	}
	if !strings.HasPrefix(dir, prefix) || !strings.HasSuffix(dir, ".slice") {
		return "", false
	}
	comp := strings.TrimSuffix(strings.TrimPrefix(dir, prefix), ".slice")
	if comp == "" || strings.Contains(comp, "-") {
		return "", false
	}
	return strings.ReplaceAll(comp, "_", "-"), true
}

// The QoS tier cgroups under kubepods; Guaranteed pods sit in kubepods itself.
const (
	tierBurstable  = "burstable"
	tierBestEffort = "besteffort"
)

// kubepodsName is the pods' parent cgroup (the kubelet's GetPodCgroupRoot):
// kubepods under the cgroup root.
func kubepodsName(root cgroupName) cgroupName { return root.child("kubepods") }

// podCgroupName is the cgroup of the pod with this UID and QoS class.
func podCgroupName(kubepods cgroupName, qos signals.QOSClass, uid string) (cgroupName, error) {
	if uid == "" || strings.ContainsAny(uid, "/.") {
		return nil, fmt.Errorf("pod UID %q cannot name a cgroup", uid)
	}
	switch qos {
	case signals.Guaranteed:
		return kubepods.child("pod" + uid), nil
	case signals.Burstable:
		return kubepods.child(tierBurstable).child("pod" + uid), nil
	case signals.BestEffort:
		return kubepods.child(tierBestEffort).child("pod" + uid), nil
	}
	return nil, fmt.Errorf("pod %s: unknown QoS class %q", uid, qos)
}

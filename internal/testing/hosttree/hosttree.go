package hosttree

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/evictd/evictd/signals"
)

// unlimited is what cgroup v1 reads as no memory limit.
const unlimited = "9223372036854771712\n"

// Memory is a memory cgroup's usage: memory.usage_in_bytes, and the
// total_inactive_file of its memory.stat. The working set is the
// difference.
type Memory struct {
	Usage        int64 // bytes
	InactiveFile int64 // bytes
}

// WorkingSet is Usage − InactiveFile, as the kubelet and evictd compute it.
func (m Memory) WorkingSet() int64 { return m.Usage - m.InactiveFile }

// Pod is one pod's cgroup.
type Pod struct {
	// UID is the pod's metadata.uid: the cgroup is named pod<UID>.
	UID string
	// QOS places the cgroup: kubepods/ (Guaranteed), kubepods/burstable/
	// or kubepods/besteffort/.
	QOS    signals.QOSClass
	Memory Memory
	// Tasks is pids.current.
	Tasks int
}

// Node is what Write writes.
type Node struct {
	// MemTotal is /proc/meminfo's MemTotal, memory.available's capacity;
	// bytes, a multiple of 1024.
	MemTotal int64
	// Root is the root memory cgroup's usage (memory.available is
	// MemTotal − its working set).
	Root Memory
	// KubepodsLimit is kubepods' memory.limit_in_bytes, the capacity of
	// allocatableMemory.available; 0 is no limit.
	KubepodsLimit int64
	// Kubepods is kubepods' usage (allocatableMemory.available is
	// KubepodsLimit − its working set).
	Kubepods Memory
	Pods     []Pod
	// HugePages is the node's hugepage pool in bytes, in 2 MiB pages
	// (a multiple of 2 MiB): /proc/meminfo's HugePages_Total and Hugetlb,
	// which kubelet 1.37 subtracts from memory.available. 0 writes the
	// lines of a kernel with no hugepages reserved.
	HugePages int64
	// NoPSI leaves out /proc/pressure/memory. An agent arms a PSI trigger
	// by writing to that file, which on a plain file overwrites the
	// averages it reads.
	NoPSI bool
}

// Tree is a written node: its two roots, for --proc-root and
// --cgroup-mount.
type Tree struct {
	Proc   string // the /proc tree
	Cgroup string // the cgroup mount, with memory/ and pids/ under it
	total  int64
	huge   int64
}

// Write writes n under dir: dir/proc and dir/cgroup.
func Write(dir string, n Node) (Tree, error) {
	t := Tree{Proc: filepath.Join(dir, "proc"), Cgroup: filepath.Join(dir, "cgroup"), total: n.MemTotal, huge: n.HugePages}
	if n.HugePages < 0 || n.HugePages%hugePageSize != 0 {
		return t, fmt.Errorf("hosttree: HugePages %d is not a whole number of 2 MiB pages", n.HugePages)
	}
	mem, pids := t.memory(), filepath.Join(t.Cgroup, "pids")
	kubepodsLimit := unlimited
	if n.KubepodsLimit > 0 {
		kubepodsLimit = fmt.Sprintln(n.KubepodsLimit)
	}
	files := map[string]string{
		filepath.Join(t.Proc, "meminfo"):                        meminfo(n.MemTotal, n.HugePages, n.Root),
		filepath.Join(t.Proc, "loadavg"):                        "3.10 2.95 2.80 4/1234 56789\n",
		filepath.Join(t.Proc, "pressure", "memory"):             "some avg10=1.50 avg60=0.80 avg300=0.20 total=123456\nfull avg10=0.40 avg60=0.10 avg300=0.02 total=45678\n",
		filepath.Join(t.Proc, "vmstat"):                         "nr_free_pages 1778721\npgscan_kswapd 0\npgscan_direct 0\n",
		filepath.Join(t.Proc, "sys", "kernel", "pid_max"):       "4194304\n",
		filepath.Join(t.Proc, "sys", "kernel", "threads-max"):   "126000\n",
		filepath.Join(mem, "memory.limit_in_bytes"):             unlimited,
		filepath.Join(mem, "memory.usage_in_bytes"):             fmt.Sprintln(n.Root.Usage),
		filepath.Join(mem, "memory.stat"):                       MemoryStatV1(n.Root.Usage, n.Root.InactiveFile),
		filepath.Join(mem, "kubepods", "memory.limit_in_bytes"): kubepodsLimit,
		filepath.Join(mem, "kubepods", "memory.usage_in_bytes"): fmt.Sprintln(n.Kubepods.Usage),
		filepath.Join(mem, "kubepods", "memory.stat"):           MemoryStatV1(n.Kubepods.Usage, n.Kubepods.InactiveFile),
		filepath.Join(mem, "kubepods", "memory.failcnt"):        "0\n",
		filepath.Join(pids, "cgroup.procs"):                     "1\n",
	}
	if n.NoPSI {
		delete(files, filepath.Join(t.Proc, "pressure", "memory"))
	}
	for _, p := range n.Pods {
		rel := PodCgroupPath(p)
		files[filepath.Join(mem, rel, "memory.limit_in_bytes")] = unlimited
		files[filepath.Join(mem, rel, "memory.usage_in_bytes")] = fmt.Sprintln(p.Memory.Usage)
		files[filepath.Join(mem, rel, "memory.stat")] = MemoryStatV1(p.Memory.Usage, p.Memory.InactiveFile)
		files[filepath.Join(pids, rel, "pids.current")] = fmt.Sprintln(p.Tasks)
		files[filepath.Join(pids, rel, "pids.max")] = "max\n"
	}
	for p, content := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return t, err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return t, err
		}
	}
	return t, nil
}

func (t Tree) memory() string { return filepath.Join(t.Cgroup, "memory") }

// SetRoot rewrites the root memory cgroup's usage and /proc/meminfo to
// match, each file replaced whole (a reader sees the old or the new
// content, never part of one).
func (t Tree) SetRoot(m Memory) error {
	mem := t.memory()
	return errors.Join(
		replace(filepath.Join(mem, "memory.usage_in_bytes"), fmt.Sprintln(m.Usage)),
		replace(filepath.Join(mem, "memory.stat"), MemoryStatV1(m.Usage, m.InactiveFile)),
		replace(filepath.Join(t.Proc, "meminfo"), meminfo(t.total, t.huge, m)),
	)
}

// RemovePod removes p's cgroups, as the kubelet does once its containers
// have stopped.
func (t Tree) RemovePod(p Pod) error {
	rel := PodCgroupPath(p)
	return errors.Join(
		os.RemoveAll(filepath.Join(t.memory(), rel)),
		os.RemoveAll(filepath.Join(t.Cgroup, "pids", rel)),
	)
}

// PodCgroupPath is where p's cgroup lives under a controller's mount.
func PodCgroupPath(p Pod) string {
	pod := "pod" + p.UID
	switch p.QOS {
	case signals.Burstable:
		return filepath.Join("kubepods", "burstable", pod)
	case signals.BestEffort:
		return filepath.Join("kubepods", "besteffort", pod)
	}
	return filepath.Join("kubepods", pod)
}

// replace writes content to a new file beside path and renames it over
// path.
func replace(path, content string) error {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// hugePageSize is the size of the hugepages Write reserves.
const hugePageSize = 2 << 20

// meminfo is a /proc/meminfo whose free and available memory follow the
// root cgroup's working set and the hugepage pool of huge bytes, all
// free, as a kernel writes it (mm/hugetlb.c, hugetlb_report_meminfo).
func meminfo(total, huge int64, root Memory) string {
	avail := max(total-root.WorkingSet()-huge, 0)
	pages := huge / hugePageSize
	return fmt.Sprintf("MemTotal:       %8d kB\nMemFree:        %8d kB\nMemAvailable:   %8d kB\n"+
		"HugePages_Total:   %5d\nHugePages_Free:    %5d\nHugePages_Rsvd:        0\nHugePages_Surp:        0\n"+
		"Hugepagesize:       %d kB\nHugetlb:        %8d kB\n",
		total>>10, avail*2/3>>10, avail>>10, pages, pages, hugePageSize>>10, huge>>10)
}

// MemoryStatV1 is a cgroup v1 memory.stat with every key the kernel writes,
// so parsing costs what it costs on a real node.
func MemoryStatV1(usage, inactiveFile int64) string {
	var b strings.Builder
	cache := max(usage/4, inactiveFile)
	rss := max(usage-cache, 0)
	for _, kv := range []struct {
		k string
		v int64
	}{
		{"cache", cache}, {"rss", rss}, {"rss_huge", 0}, {"shmem", 0}, {"mapped_file", 8192},
		{"dirty", 0}, {"writeback", 0}, {"pgpgin", 123456}, {"pgpgout", 65432}, {"pgfault", 345678},
		{"pgmajfault", 12}, {"inactive_anon", 4096}, {"active_anon", rss}, {"inactive_file", inactiveFile},
		{"active_file", cache - inactiveFile}, {"unevictable", 0}, {"hierarchical_memory_limit", 9223372036854771712},
		{"total_cache", cache}, {"total_rss", rss}, {"total_rss_huge", 0}, {"total_shmem", 0},
		{"total_mapped_file", 16384}, {"total_dirty", 0}, {"total_writeback", 0}, {"total_pgpgin", 223456},
		{"total_pgpgout", 165432}, {"total_pgfault", 445678}, {"total_pgmajfault", 22},
		{"total_inactive_anon", 8192}, {"total_active_anon", rss}, {"total_inactive_file", inactiveFile},
		{"total_active_file", cache - inactiveFile}, {"total_unevictable", 0},
	} {
		fmt.Fprintf(&b, "%s %d\n", kv.k, kv.v)
	}
	return b.String()
}

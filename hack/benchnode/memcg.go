package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// memcg reads a memory cgroup's directory: in the v1 memory hierarchy, or
// in the unified (v2) one.
type memcg struct {
	dir string
	v2  bool
}

// limit returns the cgroup's hard memory limit in bytes.
func (m memcg) limit() (int64, error) {
	if !m.v2 {
		return m.int("memory.limit_in_bytes")
	}
	b, err := os.ReadFile(filepath.Join(m.dir, "memory.max"))
	if err != nil {
		return 0, err
	}
	if v := string(bytes.TrimSpace(b)); v == "max" {
		return 0, fmt.Errorf("%s: no limit (max)", filepath.Join(m.dir, "memory.max"))
	}
	return m.int("memory.max")
}

func (m memcg) int(file string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(m.dir, file))
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Join(m.dir, file), err)
	}
	return v, nil
}

// key returns the value of key in a "key value" per line file.
func (m memcg) key(file, key string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(m.dir, file))
	if err != nil {
		return 0, err
	}
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		k, v, ok := bytes.Cut(line, []byte{' '})
		if ok && string(k) == key {
			return strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s", filepath.Join(m.dir, file), key)
}

// sample is one reading: usage and working set (usage − inactive file
// pages, as the kubelet and evictd compute it), in bytes. On v1 usage is
// memory.usage_in_bytes and the inactive file pages memory.stat's
// total_inactive_file; on v2 memory.current and inactive_file.
type sample struct {
	usage, workingSet int64
}

func (m memcg) sample() (sample, error) {
	usageFile, inactiveKey := "memory.usage_in_bytes", "total_inactive_file"
	if m.v2 {
		usageFile, inactiveKey = "memory.current", "inactive_file"
	}
	usage, err := m.int(usageFile)
	if err != nil {
		return sample{}, err
	}
	inactive, err := m.key("memory.stat", inactiveKey)
	if err != nil {
		return sample{}, err
	}
	ws := max(usage-inactive, 0)
	return sample{usage: usage, workingSet: ws}, nil
}

// treeOOMKills returns the OOM kills in the cgroup and every cgroup below
// it. On v1 that is the sum of the oom_kill counters of memory.oom_control
// over the tree: a kill counts only in the victim's own cgroup, not in its
// ancestors, and a pod's cgroup removed by the kubelet takes its count
// with it (vmstatOOMKills does not forget). On v2 memory.events' oom_kill
// already counts the whole subtree, removed cgroups included.
func (m memcg) treeOOMKills() int64 {
	if m.v2 {
		v, _ := m.key("memory.events", "oom_kill")
		return v
	}
	var sum int64
	_ = filepath.WalkDir(m.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			if v, err := (memcg{dir: p}).key("memory.oom_control", "oom_kill"); err == nil {
				sum += v
			}
		}
		return nil
	})
	return sum
}

// vmstatOOMKills returns the machine's oom_kill counter of /proc/vmstat.
func vmstatOOMKills() (int64, error) { return memcg{dir: "/proc"}.key("vmstat", "oom_kill") }

package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// memcg reads a cgroup v1 memory controller directory.
type memcg struct{ dir string }

func (m memcg) int(file string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(m.dir, file))
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
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
	return 0, fmt.Errorf("%s: no %s", file, key)
}

// sample is one reading: usage and working set (usage − total_inactive_file,
// as the kubelet and evictd compute it), in bytes.
type sample struct {
	usage, workingSet int64
}

func (m memcg) sample() (sample, error) {
	usage, err := m.int("memory.usage_in_bytes")
	if err != nil {
		return sample{}, err
	}
	inactive, err := m.key("memory.stat", "total_inactive_file")
	if err != nil {
		return sample{}, err
	}
	ws := max(usage-inactive, 0)
	return sample{usage: usage, workingSet: ws}, nil
}

// treeOOMKills returns the sum of the oom_kill counters of memory.oom_control
// in the cgroup and every cgroup below it: on cgroup v1 a kill counts only
// in the victim's own cgroup, not in its ancestors. A pod's cgroup removed
// by the kubelet takes its count with it; vmstatOOMKills does not forget.
func (m memcg) treeOOMKills() int64 {
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

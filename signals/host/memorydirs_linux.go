package host

import "fmt"

// MemoryCgroupDirs returns the directories of the root and kubepods memory
// cgroups that cfg names (the cgroups behind memory.available and
// allocatableMemory.available), and whether they are cgroup v2. kubepods
// need not exist yet.
func MemoryCgroupDirs(cfg Config) (root, kubepods string, v2 bool, err error) {
	if err := cfg.Validate(); err != nil {
		return "", "", false, err
	}
	cg, err := newCgroups(cfg)
	if err != nil {
		return "", "", false, err
	}
	v, err := cg.version()
	if err != nil {
		return "", "", false, fmt.Errorf("memory cgroups: %w", err)
	}
	return cg.memoryDir(v, nil), cg.memoryDir(v, cg.kubepods), v == cgroupV2, nil
}

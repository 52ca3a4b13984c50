package host

import (
	"github.com/evictd/evictd/signals"
)

// Sources builds the sources of this host's signals: memory.available,
// allocatableMemory.available, nodefs.available and nodefs.inodesFree on
// KubeletRootDir, imagefs.available and imagefs.inodesFree on ImageFsPath
// when it is set, pid.available, and the six memory.pressure.* stall
// signals (which only inform unless a threshold is set on them).
//
// The filesystem sources find their filesystems through fs, which the
// caller may share with others (nil: one of their own): each holds a copy
// of the node's mount table.
//
// The allocatable source is always built: while the kubepods cgroup is
// missing each Observe fails, so allocatableMemory.available is missing
// (never zero) and appears as soon as the cgroup does.
func Sources(cfg Config, fs *Filesystems) ([]signals.Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	mem, err := NewMemorySource(cfg)
	if err != nil {
		return nil, err
	}
	alloc, err := NewAllocatableSource(cfg)
	if err != nil {
		return nil, err
	}
	out := []signals.Source{mem, alloc}
	if fs == nil {
		fs = NewFilesystems()
	}
	node, err := NodeFsSources(fs, cfg.KubeletRootDir)
	if err != nil {
		return nil, err
	}
	out = append(out, node...)
	if cfg.ImageFsPath != "" {
		image, err := ImageFsSources(fs, cfg.ImageFsPath)
		if err != nil {
			return nil, err
		}
		out = append(out, image...)
	}
	pid, err := NewPIDSource(cfg)
	if err != nil {
		return nil, err
	}
	psi, err := NewMemoryPressureSource(cfg)
	if err != nil {
		return nil, err
	}
	return append(out, pid, psi), nil
}

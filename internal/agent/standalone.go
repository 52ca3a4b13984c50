package agent

import (
	"context"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/signals/host"
)

// cgroupPods is the pod source of standalone mode: with no API server, the
// pods are the pod cgroups under kubepods, known by UID and QoS class only.
type cgroupPods struct{ cfg host.Config }

func (p cgroupPods) Pods(context.Context) ([]signals.Pod, error) { return host.DiscoverPods(p.cfg) }

// InFlight is always nil: without an API server evictd evicts nothing and
// cannot see a pod's deletion.
func (cgroupPods) InFlight() []decide.InFlight { return nil }

// LayoutOf tells whether the image filesystem is dedicated; without
// --imagefs-path evictd knows of no image filesystem yet and treats the node
// as one filesystem.
func LayoutOf(cfg host.Config, fs *host.Filesystems) (signals.FsLayout, error) {
	if cfg.ImageFsPath == "" {
		return signals.SingleFs, nil
	}
	return fs.Layout(cfg.KubeletRootDir, cfg.ImageFsPath)
}

package ranking

import (
	"testing"

	"github.com/evictd/evictd/signals"
)

func TestStatsFor(t *testing.T) {
	for _, tc := range []struct {
		sig    signals.Signal
		layout signals.FsLayout
		want   signals.PodStatsKinds
	}{
		{signals.MemoryAvailable, signals.SingleFs, signals.PodMemory},
		{signals.AllocatableMemoryAvailable, signals.SingleFs, signals.PodMemory},
		{signals.MemoryPressureFullAvg10, signals.SingleFs, signals.PodMemory},
		{signals.PIDAvailable, signals.SingleFs, signals.PodProcesses},
		{signals.NodeFsAvailable, signals.SingleFs, signals.PodDisk},
		{signals.NodeFsInodesFree, signals.DedicatedImageFs, signals.PodDisk},
		{signals.ImageFsAvailable, signals.DedicatedImageFs, signals.PodDisk},
		{signals.ContainerFsAvailable, signals.SplitImageFs, signals.PodDisk},
		// Images alone: ranked by priority, no stats read.
		{signals.ImageFsAvailable, signals.SplitImageFs, 0},
		{signals.Signal("unknown"), signals.SingleFs, 0},
	} {
		if got := StatsFor(tc.sig, tc.layout); got != tc.want {
			t.Errorf("StatsFor(%s, %s): got %s, want %s", tc.sig, tc.layout, got, tc.want)
		}
	}
}

package host

import (
	"context"
	"strings"
	"testing"

	"github.com/evictd/evictd/signals"
)

func TestSources(t *testing.T) {
	psi := []signals.Signal{
		signals.MemoryPressureSomeAvg10, signals.MemoryPressureSomeAvg60, signals.MemoryPressureSomeAvg300,
		signals.MemoryPressureFullAvg10, signals.MemoryPressureFullAvg60, signals.MemoryPressureFullAvg300,
	}
	tests := []struct {
		name        string
		imagefs     bool
		edits       map[string]*string
		procEdits   map[string]*string
		wantSignals []signals.Signal
		wantErr     string
	}{
		{name: "nodefs only",
			wantSignals: append([]signals.Signal{signals.MemoryAvailable, signals.AllocatableMemoryAvailable,
				signals.NodeFsAvailable, signals.NodeFsInodesFree, signals.PIDAvailable}, psi...)},
		{name: "with imagefs", imagefs: true,
			wantSignals: append([]signals.Signal{signals.MemoryAvailable, signals.AllocatableMemoryAvailable,
				signals.NodeFsAvailable, signals.NodeFsInodesFree, signals.ImageFsAvailable, signals.ImageFsInodesFree, signals.PIDAvailable}, psi...)},
		{name: "no PSI: the stall signals missing, the rest observed",
			procEdits: map[string]*string{"pressure": nil},
			wantSignals: []signals.Signal{signals.MemoryAvailable, signals.AllocatableMemoryAvailable,
				signals.NodeFsAvailable, signals.NodeFsInodesFree, signals.PIDAvailable},
			wantErr: "memory.pressure.*: read "},
		{name: "no kubepods: allocatable missing, the rest observed",
			edits: map[string]*string{"memory/kubepods": nil},
			wantSignals: append([]signals.Signal{signals.MemoryAvailable,
				signals.NodeFsAvailable, signals.NodeFsInodesFree, signals.PIDAvailable}, psi...),
			wantErr: "allocatableMemory.available: kubepods cgroup: read "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cgroup := copyFixture(t, "cgroupv1")
			proc := copyFixture(t, "proc")
			edit(t, cgroup, tc.edits)
			edit(t, proc, tc.procEdits)
			cfg := fixtureConfig(t, proc, cgroup, DriverCgroupfs)
			if tc.imagefs {
				cfg.ImageFsPath = t.TempDir()
			}
			srcs, err := Sources(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := signals.Collect(context.Background(), now, srcs)
			if tc.wantErr == "" && err != nil {
				t.Errorf("got error %v, want none", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("got error %v, want one holding %q", err, tc.wantErr)
			}
			if len(got) != len(tc.wantSignals) {
				t.Errorf("got %d observations %v, want %v", len(got), got, tc.wantSignals)
			}
			for _, s := range tc.wantSignals {
				o, ok := got[s]
				if !ok || o.Time != now || o.Capacity <= 0 {
					t.Errorf("%s: got %+v (observed %v), want an observation at %v", s, o, ok, now)
				}
			}
			// Exact figures from the fixture trees.
			exact := map[signals.Signal]signals.Observation{
				signals.MemoryAvailable:            memObs(9261023232),
				signals.AllocatableMemoryAvailable: allocObs(9126805504, 12884901888),
				signals.PIDAvailable:               pidObs(124766, 126000),
				// The first reading has no earlier reclaim counts to
				// corroborate the stall with: local.
				signals.MemoryPressureFullAvg10: localStall(signals.MemoryPressureFullAvg10, 825),
			}
			for s, want := range exact {
				if o, ok := got[s]; ok && o != want {
					t.Errorf("got %+v, want %+v", o, want)
				}
			}
		})
	}
}

func TestSourcesRejectsConfig(t *testing.T) {
	cfg := fixtureConfig(t, fixture(t, "proc"), fixture(t, "cgroupv1"), "systemd-ish")
	if _, err := Sources(cfg, nil); err == nil || !strings.Contains(err.Error(), `CgroupDriver (--cgroup-driver) "systemd-ish"`) {
		t.Fatalf("got %v, want the bad driver named", err)
	}
}

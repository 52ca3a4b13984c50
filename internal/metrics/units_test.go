package metrics

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/evictd/evictd/signals"
)

// TestUnitFamilies sets a reading and a threshold for every signal and
// checks that each lands in the families of its unit alone, and that each
// family's HELP names exactly the signals it carries.
func TestUnitFamilies(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	for _, s := range signals.All() {
		m.SetObservation(s, 1, signals.StallScale)
		m.SetThreshold(s, KindHard, 1, false)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	want := map[string][]string{
		"evictd_signal_available_bytes":  {"memory.available", "allocatableMemory.available", "nodefs.available", "imagefs.available", "containerfs.available"},
		"evictd_signal_available_inodes": {"nodefs.inodesFree", "imagefs.inodesFree", "containerfs.inodesFree"},
		"evictd_signal_available_pids":   {"pid.available"},
		"evictd_threshold_ratio": {
			"memory.pressure.some.avg10", "memory.pressure.some.avg60", "memory.pressure.some.avg300",
			"memory.pressure.full.avg10", "memory.pressure.full.avg60", "memory.pressure.full.avg300",
		},
	}
	// Capacity and thresholds carry the same signals as the reading.
	for _, u := range []string{"bytes", "inodes", "pids"} {
		want["evictd_signal_capacity_"+u] = want["evictd_signal_available_"+u]
		want["evictd_threshold_"+u] = want["evictd_signal_available_"+u]
	}
	for family, wantSignals := range want {
		t.Run(family, func(t *testing.T) {
			i := slices.IndexFunc(mfs, func(mf *dto.MetricFamily) bool { return mf.GetName() == family })
			if i < 0 {
				t.Fatalf("no %s", family)
			}
			var got []string
			for _, m := range mfs[i].GetMetric() {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == "signal" {
						got = append(got, lp.GetValue())
					}
				}
			}
			if !slices.Equal(sortedCopy(got), sortedCopy(wantSignals)) {
				t.Errorf("got signals %v, want %v", got, wantSignals)
			}
			help := mfs[i].GetHelp()
			for _, s := range signals.All() {
				if named, carried := mentions(help, string(s)), slices.Contains(wantSignals, string(s)); named != carried {
					t.Errorf("HELP names %s: %v, family carries it: %v; HELP %q", s, named, carried, help)
				}
			}
		})
	}
}

// TestUnitFamiliesForget checks that a signal that cannot be read loses
// its series in its unit's families too.
func TestUnitFamiliesForget(t *testing.T) {
	m := New(prometheus.NewRegistry())
	for _, s := range []signals.Signal{signals.NodeFsInodesFree, signals.ImageFsInodesFree} {
		m.SetObservation(s, 100, 1000)
		m.SetThreshold(s, KindSoft, 10, false)
	}
	m.ForgetObservation(signals.NodeFsInodesFree)
	g := m.byUnit[unitInodes]
	want := `
# HELP evictd_signal_available_inodes Amount of the signal's resource available at the last observation, in inodes, by signal: nodefs.inodesFree, imagefs.inodesFree, containerfs.inodesFree.
# TYPE evictd_signal_available_inodes gauge
evictd_signal_available_inodes{signal="imagefs.inodesFree"} 100
# HELP evictd_signal_capacity_inodes Capacity of the signal's resource at the last observation, in inodes, by signal: nodefs.inodesFree, imagefs.inodesFree, containerfs.inodesFree.
# TYPE evictd_signal_capacity_inodes gauge
evictd_signal_capacity_inodes{signal="imagefs.inodesFree"} 1000
# HELP evictd_threshold_inodes Eviction threshold in inodes (percentages resolved against capacity), by signal: nodefs.inodesFree, imagefs.inodesFree, containerfs.inodesFree; and kind: hard, soft. The node is under pressure while evictd_signal_available_inodes (matched on signal) is below it.
# TYPE evictd_threshold_inodes gauge
evictd_threshold_inodes{kind="soft",signal="imagefs.inodesFree"} 10
`
	if err := testutil.CollectAndCompare(collectors(g.available, g.capacity, g.threshold), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

package main

import (
	"slices"
	"testing"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/reclaim"
	"github.com/evictd/evictd/signals"
)

// TestReclaimKindsAreTheLoops checks that every kind of reclaim the
// reclaim package can run, which runtimeReclaimer hands the loop as a
// decide.ReclaimKind, is one of decide.ReclaimKinds: the kinds whose
// evictd_reclaim_total series exist from startup.
func TestReclaimKindsAreTheLoops(t *testing.T) {
	seen := map[decide.ReclaimKind]bool{}
	for _, sig := range signals.All() {
		if sig.Pressure() != signals.DiskPressure {
			continue
		}
		for _, layout := range []signals.FsLayout{signals.SingleFs, signals.DedicatedImageFs, signals.SplitImageFs} {
			kinds, err := reclaim.Plan(sig, layout)
			if err != nil {
				t.Fatalf("Plan(%s, %s): %v", sig, layout, err)
			}
			for _, k := range kinds {
				seen[decide.ReclaimKind(k)] = true
			}
		}
	}
	kinds := []decide.ReclaimKind{decide.ReclaimContainers, decide.ReclaimImages}
	for k := range seen {
		if !slices.Contains(kinds, k) {
			t.Errorf("reclaim runs kind %q, which decide names not among %v", k, kinds)
		}
	}
	if len(seen) != len(kinds) {
		t.Errorf("reclaim runs kinds %v, want every one of %v", seen, kinds)
	}
}
